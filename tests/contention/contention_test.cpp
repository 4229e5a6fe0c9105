// Contention: 16 threads in one process, and 4 worker processes, hammer the
// same few keys (three unrelated ones and an ancestor/descendant family) with
// tryAcquireLock and acquireLock. Every hold is recorded; the checker that
// `dlmctl demo` uses then proves that no two holds of conflicting keys
// overlapped, that each key's fencing tokens grew in hold order, that no
// hold's acquiredAt came before the release call of a conflicting hold that
// ended before it, and that every release returned true. With modes: 16 readers
// and 2 writers across 4 processes on one key family (readers share, writers
// exclude everything and are served), and the three-process fairness run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "contender.h"
#include "contention/fairness.h"
#include "contention/scenario.h"
#include "contention/worker_processes.h"
#include "dlm/dlm.h"
#include "dlm/lock_store_admin.h"
#include "dlm/lock_store_wrapper.h"
#include "hold_log.h"
#include "support/fake_store.h"
#include "support/scheduling_lag.h"
#include "support/single_call_batches.h"
#include "support/test_stores.h"
#include "temp_dir.h"

namespace dlm::test {
namespace {

using oracle::ContendResult;
using oracle::HoldReport;
using namespace std::chrono_literals;

// Bounded work: a scenario is a number of attempts (or holds) per thread, not
// a time window, so a slow or busy machine makes the run longer, not
// weaker; kMaxSeconds only ends a run that is stuck.
constexpr int kThreads = 16;
constexpr std::int64_t kAttemptsPerThread = 40;
constexpr int kProcesses = 4;
constexpr int kThreadsPerProcess = 2;
constexpr std::int64_t kAttemptsPerProcessThread = 60;
constexpr double kMaxSeconds = 120;
// Readers and writers: every reader thread (16) runs until each has had this
// many holds, at least kMinReaderHolds in all, and each of the 2 writers
// until it had one.
constexpr std::int64_t kHoldsPerReaderThread = 8;
constexpr std::int64_t kMinReaderHolds = 100;
// The fairness ctest: 3 runs, each until every process had kFairnessHolds
// holds (dlm_fairness does the full 10 runs of 5 s).
constexpr int kFairnessRuns = 3;
constexpr std::int64_t kFairnessHolds = 150;
constexpr double kFairnessMaxSeconds = 30;
constexpr double kFairShare = 0.2;
// Fewer acquisitions than this and the run proved nothing.
constexpr std::int64_t kMinAcquisitions = 100;

std::unique_ptr<DistributedLockManager> makeManager(
    std::shared_ptr<LockStore> store) {
  auto m = DistributedLockManager::builder()
               .clientId(contention::kClient)
               .farmId(contention::kFarm)
               .store(std::move(store))
               .configuration(contention::scenarioConfiguration())
               .build();
  m->initialize();
  return m;
}

std::chrono::steady_clock::time_point deadlineFromNow() {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(kMaxSeconds));
}

// Runs `threads` contenders spread over `managers`, all released at once.
std::vector<ContendResult> runThreads(
    const std::vector<std::unique_ptr<DistributedLockManager>>& managers,
    int threads, std::int64_t attempts,
    oracle::ContendOptions (*options)(int, std::int64_t,
                                      std::chrono::steady_clock::time_point) =
        contention::scenarioOptions) {
  std::vector<ContendResult> results(static_cast<std::size_t>(threads));
  std::promise<void> start;
  std::shared_future<void> go = start.get_future().share();
  const auto deadline = deadlineFromNow();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t, go] {
      DistributedLockManager& m =
          *managers[static_cast<std::size_t>(t) % managers.size()];
      go.wait();
      results[static_cast<std::size_t>(t)] =
          oracle::contend(m, options(t, attempts, deadline));
    });
  }
  start.set_value();
  for (auto& th : pool) th.join();
  return results;
}

std::string problemsText(const HoldReport& report) {
  std::string text;
  for (const auto& line : oracle::describeProblems(report)) text += line + "\n";
  return text;
}

// On a fresh database the tokens of a key are exactly 1..n (unique, which
// the checker proves, and from 1 to the number of holds; in hold order for
// exclusive holds, which the checker proves too), and the row's counter
// agrees: no acquisition went unrecorded or was counted twice.
void expectFencingTokensOneToN(const std::vector<oracle::Hold>& holds,
                               const HoldReport& report,
                               DistributedLockManager& manager) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> range;
  for (const oracle::Hold& h : holds) {
    auto [it, fresh] =
        range.emplace(h.key, std::make_pair(h.fencing, h.fencing));
    if (!fresh) {
      it->second.first = std::min(it->second.first, h.fencing);
      it->second.second = std::max(it->second.second, h.fencing);
    }
  }
  for (const auto& k : report.keys) {
    const Lock lock = manager.getLockInstance(k.key, LockLevel::DC);
    const auto row = adminOf(manager.store()).describe(lock.storeKey());
    ASSERT_TRUE(row.has_value()) << k.key;
    EXPECT_EQ(range[k.key].first, 1) << k.key;
    EXPECT_EQ(range[k.key].second, k.holds) << k.key;
    EXPECT_EQ(row->fencingToken, k.holds) << k.key;
  }
}

// The assertions every scenario ends with. `manager` names the keys and
// reads the rows back.
void expectMutualExclusion(const std::vector<ContendResult>& results,
                           DistributedLockManager& manager,
                           std::int64_t minAcquisitions) {
  std::vector<oracle::Hold> holds;
  std::int64_t acquisitions = 0;
  std::int64_t attempts = 0;
  for (const auto& r : results) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.failedReleases, 0);
    acquisitions += r.acquisitions;
    attempts += r.attempts;
    holds.insert(holds.end(), r.holds.begin(), r.holds.end());
  }
  EXPECT_EQ(static_cast<std::int64_t>(holds.size()), acquisitions);

  const HoldReport report = oracle::checkHolds(holds, '.');
  EXPECT_EQ(report.overlapCount, 0) << problemsText(report);
  EXPECT_TRUE(report.fencingViolations.empty()) << problemsText(report);
  EXPECT_EQ(report.earlyAcquisitionCount, 0) << problemsText(report);
  EXPECT_TRUE(report.failedReleases.empty()) << problemsText(report);
  EXPECT_GE(acquisitions, minAcquisitions)
      << "too few acquisitions to prove anything (" << attempts << " attempts)";

  // Every key of the scenario, the parent and its descendants included, was
  // held at least once: the hierarchy checks were exercised.
  std::map<std::string, oracle::KeySummary> byKey;
  for (const auto& k : report.keys) byKey[k.key] = k;
  for (const auto& k : contention::scenarioKeys()) {
    EXPECT_GE(byKey[k.id].holds, 1) << k.id << " was never acquired";
  }

  expectFencingTokensOneToN(holds, report, manager);
  // Everything was released.
  const auto held = adminOf(manager.store()).listHeld("");
  EXPECT_TRUE(held.empty()) << held.size() << " locks still held, first "
                            << (held.empty() ? "" : held.front().key);

  std::printf("[ contention ] %lld attempts, %lld acquisitions, %zu keys\n",
              static_cast<long long>(attempts),
              static_cast<long long>(acquisitions), report.keys.size());
}

pid_t spawnWorker(const std::vector<std::string>& args, const char* program) {
  std::string problem;
  const pid_t pid = contention::spawnProcess(program, args, &problem);
  if (pid <= 0) ADD_FAILURE() << problem;
  return pid;
}

using contention::waitForExit;

// The results of `run`, every worker problem reported as a failure.
std::vector<ContendResult> resultsOf(const contention::ProcessRun& run) {
  for (const auto& p : run.problems) ADD_FAILURE() << p;
  return run.results;
}

class Contention : public ::testing::TestWithParam<std::string> {};

TEST_P(Contention, SixteenThreadsInOneProcessNeverOverlap) {
  auto env = makeEnvironment(GetParam());
  // Four store objects (connections), four threads on each.
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  for (int i = 0; i < 4; ++i) managers.push_back(makeManager(env->newStore()));
  const auto results = runThreads(managers, kThreads, kAttemptsPerThread);
  expectMutualExclusion(results, *managers.front(), kMinAcquisitions);
}

TEST_P(Contention, FourProcessesNeverOverlap) {
  auto env = makeEnvironment(GetParam());
  oracle::TempDir dir("dlm-contention");
  const std::vector<std::string> mixed{
      "--threads", std::to_string(kThreadsPerProcess), "--attempts",
      std::to_string(kAttemptsPerProcessThread)};
  const auto run = contention::runWorkerProcesses(
      env->url(), env->postgresSchema(),
      std::vector<std::vector<std::string>>(kProcesses, mixed),
      contention::RunUntil{0, kMaxSeconds}, dir.path().string());
  const auto results = resultsOf(run);
  ASSERT_EQ(static_cast<int>(results.size()), kProcesses);
  auto manager = makeManager(env->newStore());
  expectMutualExclusion(results, *manager, kMinAcquisitions);
}

// 16 readers and 2 writers in 4 processes on "doc" and "doc.a": readers of
// both keys share (and do overlap), no hold overlaps one it conflicts with,
// and both writers are served while the readers keep arriving.
TEST_P(Contention, SixteenReadersAndTwoWritersInFourProcesses) {
  auto env = makeEnvironment(GetParam());
  oracle::TempDir dir("dlm-readers");
  const std::vector<std::string> readers{
      "--scenario", "readers", "--threads", "4", "--attempts", "1"};
  // Each writer must be served once while the readers keep arriving (the
  // fairness promise); more writer holds would measure how often SQLite's
  // write lock comes its way on a busy machine, which is not the promise.
  auto withWriter = [&](const std::string& key) {
    auto args = readers;
    args.insert(args.end(), {"--writer", key, "--writer-target-holds", "1"});
    return args;
  };
  // Worker N's threads are numbered N * 100 + t; the writer comes after the
  // 4 readers.
  const std::map<int, std::string> writers{{104, "doc"}, {204, "doc.a"}};
  const auto run = contention::runWorkerProcesses(
      env->url(), env->postgresSchema(),
      {withWriter("doc"), withWriter("doc.a"), readers, readers},
      contention::RunUntil{kHoldsPerReaderThread, kMaxSeconds},
      dir.path().string());
  const auto results = resultsOf(run);
  ASSERT_EQ(results.size(), 4U);

  std::vector<oracle::Hold> holds;
  EXPECT_TRUE(run.reachedTargets)
      << "not every reader had " << kHoldsPerReaderThread
      << " holds and every writer one within " << kMaxSeconds << " s";
  // Begun before the readers were told to stop: while they kept arriving.
  std::map<int, std::int64_t> writerHolds;
  std::int64_t readerHolds = 0;
  for (const auto& r : results) {
    EXPECT_EQ(r.failedReleases, 0);
    for (const auto& h : r.holds) {
      holds.push_back(h);
      if (h.shared) {
        ++readerHolds;
        continue;
      }
      const auto w = writers.find(h.worker);
      ASSERT_NE(w, writers.end()) << "an exclusive hold by " << h.worker;
      EXPECT_EQ(h.key, w->second);
      if (h.startNs < run.stopNs) ++writerHolds[h.worker];
    }
  }
  const HoldReport report = oracle::checkHolds(holds, '.');
  EXPECT_EQ(report.overlapCount, 0) << problemsText(report);
  EXPECT_TRUE(report.fencingViolations.empty()) << problemsText(report);
  EXPECT_EQ(report.earlyAcquisitionCount, 0) << problemsText(report);
  EXPECT_TRUE(report.failedReleases.empty()) << problemsText(report);
  EXPECT_GE(static_cast<std::int64_t>(holds.size()), kMinReaderHolds);
  EXPECT_GT(report.sharedOverlapCount, 0) << "readers never held together";
  // Readers kept arriving until they were told to stop; a writer's hold
  // that began before then was served in their midst.
  for (const auto& [worker, key] : writers) {
    EXPECT_GE(writerHolds[worker], 1)
        << "the writer of '" << key << "' was never served while readers ran";
  }
  auto manager = makeManager(env->newStore());
  expectFencingTokensOneToN(holds, report, *manager);
  const auto held = adminOf(manager->store()).listHeld("");
  EXPECT_TRUE(held.empty()) << held.size() << " locks still held";
  std::printf(
      "[ readers ] %lld reader holds, %lld shared overlaps, writer holds %lld "
      "(doc) / %lld (doc.a)\n",
      static_cast<long long>(readerHolds),
      static_cast<long long>(report.sharedOverlapCount),
      static_cast<long long>(writerHolds[104]),
      static_cast<long long>(writerHolds[204]));
}

// Two processes each hold one lock and ask for the other's: exactly one is
// told DEADLOCK_DETECTED at once, releases, and the other then acquires.
TEST_P(Contention, TwoProcessesInADeadlockOneIsToldAndTheOtherAcquires) {
  auto env = makeEnvironment(GetParam());
  oracle::TempDir dir("dlm-deadlock");
  const std::int64_t startAt =
      oracle::steadyNowNs() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(1500ms).count();
  const char* holds[2] = {"left", "right"};
  const SchedulingLag lag;
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int w = 0; w < 2; ++w) {
    outs.push_back((dir.path() / ("side-" + std::to_string(w))).string());
    std::vector<std::string> args{"dlm_deadlock_worker",
                                  "--url",
                                  env->url(),
                                  "--hold",
                                  holds[w],
                                  "--want",
                                  holds[1 - w],
                                  "--start-at-ns",
                                  std::to_string(startAt),
                                  "--out",
                                  outs.back()};
    if (!env->postgresSchema().empty()) {
      args.push_back("--schema");
      args.push_back(env->postgresSchema());
    }
    pids.push_back(spawnWorker(args, DLM_DEADLOCK_WORKER));
  }
  std::vector<std::pair<std::string, long>> outcomes;
  for (int w = 0; w < 2; ++w) {
    if (pids[static_cast<std::size_t>(w)] <= 0) continue;
    const int status = waitForExit(pids[static_cast<std::size_t>(w)]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "side " << w << " ended with status " << status;
    std::ifstream in(outs[static_cast<std::size_t>(w)]);
    std::string outcome;
    long ms = -1;
    in >> outcome >> ms;
    outcomes.emplace_back(outcome, ms);
  }
  ASSERT_EQ(outcomes.size(), 2U);
  const std::string deadlock =
      std::to_string(static_cast<int>(ErrorCode::DEADLOCK_DETECTED));
  const int told =
      (outcomes[0].first == deadlock) + (outcomes[1].first == deadlock);
  ASSERT_EQ(told, 1) << outcomes[0].first << " / " << outcomes[1].first;
  const auto& loser = outcomes[0].first == deadlock ? outcomes[0] : outcomes[1];
  const auto& winner =
      outcomes[0].first == deadlock ? outcomes[1] : outcomes[0];
  // Told at once (within a second), not after waiting: plus what this
  // machine's scheduling adds to the few wake-ups on the way.
  const auto toldBound = 1000ms + lag.slack(4);
  EXPECT_LT(loser.second, toldBound.count())
      << "told within a second (+ " << lag.slack(4).count()
      << " ms scheduling slack)";
  EXPECT_EQ(winner.first, "acquired");
  EXPECT_LT(winner.second, 10000) << "well before its 20 s timeout";
}

// A build with neither store has nothing to instantiate. "pgbouncer": the
// same runs through PgBouncer in transaction pooling, the worker processes
// naming it by a URL with dlm's pooler parameters.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Contention);
INSTANTIATE_TEST_SUITE_P(Stores, Contention,
                         ::testing::ValuesIn(conformanceStores()),
                         [](const auto& info) { return info.param; });

// The fairness run: three processes looping acquireLock / hold 1 ms /
// release on "p", "p.c" and "p.c.d" (every pair conflicts): each gets at
// least 20 % of the holds in every run, and no two holds overlap.
class Fairness : public ::testing::TestWithParam<std::string> {};

TEST_P(Fairness, ThreeProcessesOnOnePathEachGetAFifth) {
  auto env = makeEnvironment(GetParam());
  for (int r = 1; r <= kFairnessRuns; ++r) {
    oracle::TempDir dir("dlm-fairness");
    const auto run = contention::runFairness(
        env->url(), env->postgresSchema(),
        contention::RunUntil{kFairnessHolds, kFairnessMaxSeconds}, dir.path().string());
    for (const auto& p : run.problems)
      ADD_FAILURE() << "run " << r << ": " << p;
    const std::string shares = contention::describeShares(run);
    std::printf("[ fairness ] %s run %d: %s\n", GetParam().c_str(), r,
                shares.c_str());
    EXPECT_EQ(run.report.overlapCount, 0) << problemsText(run.report);
    EXPECT_TRUE(run.report.fencingViolations.empty())
        << problemsText(run.report);
    EXPECT_EQ(run.report.earlyAcquisitionCount, 0) << problemsText(run.report);
    // Enough holds that a fifth means something: the run lasts until every
    // process had kFairnessHolds (a starved one never gets there, and the
    // run ends at kFairnessMaxSeconds with its small share).
    EXPECT_TRUE(run.reachedTargets)
        << "run " << r << ": not every process had " << kFairnessHolds
        << " holds within " << kFairnessMaxSeconds << " s: " << shares;
    EXPECT_GE(run.total, 100) << "run " << r;
    ASSERT_EQ(run.holds.size(), 3U);
    EXPECT_GE(run.minShare(), kFairShare) << "run " << r << ": " << shares;
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Fairness);
INSTANTIATE_TEST_SUITE_P(Stores, Fairness,
                         ::testing::ValuesIn(compiledStores()),
                         [](const auto& info) { return info.param; });

// The manager itself under 16 threads, on the in-memory store: no database,
// so ThreadSanitizer sees the manager's own synchronisation only.
TEST(ContentionOnFakeStore, SixteenThreadsNeverOverlap) {
  // On the host's clock, as the stores are: acquiredAt is judged too.
  auto store = std::make_shared<FakeStore>(true);
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  for (int i = 0; i < 4; ++i) managers.push_back(makeManager(store));
  const auto results = runThreads(managers, kThreads, kAttemptsPerThread);
  expectMutualExclusion(results, *managers.front(), kMinAcquisitions);
}

// A store that grants every request (exclusion broken on purpose), to prove
// that the scenario and the checker would notice.
class GrantEverythingStore final : public SingleCallBatches {
 public:
  using SingleCallBatches::SingleCallBatches;
  AcquireResult tryAcquire(const AcquireRequest& r) override {
    AcquireResult result;
    result.acquired = true;
    result.fencingToken = ++fencing_;
    result.acquiredAt = now();
    result.expiresAt = result.acquiredAt + r.ttl;
    return result;
  }
  bool release(const StoreKey&, std::string_view, LockMode) override {
    return true;
  }

 private:
  std::atomic<std::int64_t> fencing_{0};
};

TEST(ContentionChecker, CatchesAStoreThatLetsTwoHoldersIn) {
  auto store =
      std::make_shared<GrantEverythingStore>(std::make_shared<FakeStore>());
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  managers.push_back(makeManager(store));
  const auto results = runThreads(managers, 8, 20);
  std::vector<oracle::Hold> holds;
  for (const auto& r : results) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    holds.insert(holds.end(), r.holds.begin(), r.holds.end());
  }
  const HoldReport report = oracle::checkHolds(holds, '.');
  EXPECT_GT(report.overlapCount, 0);
  EXPECT_FALSE(report.ok());
}

}  // namespace
}  // namespace dlm::test
