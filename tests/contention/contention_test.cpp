// Contention: 16 threads in one process, and 4 worker processes, hammer the
// same few keys (three unrelated ones and an ancestor/descendant family) with
// tryAcquireLock and acquireLock. Every hold is recorded; the checker that
// `dlmctl demo` uses then proves that no two holds of conflicting keys
// overlapped, that each key's fencing tokens grew in hold order, and that
// every release returned true.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

#include "cli/contender.h"
#include "cli/hold_log.h"
#include "cli/temp_dir.h"
#include "contention/scenario.h"
#include "dlm/dlm.h"
#include "support/fake_store.h"
#include "support/forwarding_store.h"
#include "support/test_stores.h"

extern char** environ;

namespace dlm::test {
namespace {

using cli::ContendResult;
using cli::HoldReport;
using namespace std::chrono_literals;

// Bounded work: a scenario takes a few seconds on SQLite and PostgreSQL, and
// still finishes in time under ThreadSanitizer (the deadline cuts it short;
// the minimum below is set for that case).
constexpr int kThreads = 16;
constexpr std::int64_t kAttemptsPerThread = 40;
constexpr int kProcesses = 4;
constexpr int kThreadsPerProcess = 2;
constexpr std::int64_t kAttemptsPerProcessThread = 60;
constexpr double kMaxSeconds = 10;
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
    cli::ContendOptions (*options)(int, std::int64_t,
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
          cli::contend(m, options(t, attempts, deadline));
    });
  }
  start.set_value();
  for (auto& th : pool) th.join();
  return results;
}

std::string problemsText(const HoldReport& report) {
  std::string text;
  for (const auto& line : cli::describeProblems(report)) text += line + "\n";
  return text;
}

// The assertions every scenario ends with. `manager` names the keys and
// reads the rows back.
void expectMutualExclusion(const std::vector<ContendResult>& results,
                           DistributedLockManager& manager,
                           std::int64_t minAcquisitions) {
  std::vector<cli::Hold> holds;
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

  const HoldReport report = cli::checkHolds(holds, '.');
  EXPECT_EQ(report.overlapCount, 0) << problemsText(report);
  EXPECT_TRUE(report.fencingViolations.empty()) << problemsText(report);
  EXPECT_TRUE(report.failedReleases.empty()) << problemsText(report);
  EXPECT_GE(acquisitions, minAcquisitions)
      << "too few acquisitions to prove anything (" << attempts << " attempts)";

  // Every key of the scenario, the parent and its descendants included, was
  // held at least once: the hierarchy checks were exercised.
  std::map<std::string, cli::KeySummary> byKey;
  for (const auto& k : report.keys) byKey[k.key] = k;
  for (const auto& k : contention::scenarioKeys()) {
    EXPECT_GE(byKey[k.id].holds, 1) << k.id << " was never acquired";
  }

  // On a fresh database the tokens of a key are exactly 1..n in hold order,
  // and the row agrees: no acquisition went unrecorded or was counted twice.
  for (const auto& k : report.keys) {
    const Lock lock = manager.getLockInstance(k.key, LockLevel::DC);
    const auto row = manager.store().describe(lock.storeKey());
    ASSERT_TRUE(row.has_value()) << k.key;
    EXPECT_EQ(k.firstFencing, 1) << k.key;
    EXPECT_EQ(k.lastFencing, k.holds) << k.key;
    EXPECT_EQ(row->fencingToken, k.lastFencing) << k.key;
  }
  // Everything was released.
  const auto held = manager.store().listHeld("");
  EXPECT_TRUE(held.empty()) << held.size() << " locks still held, first "
                            << (held.empty() ? "" : held.front().key);

  std::printf("[ contention ] %lld attempts, %lld acquisitions, %zu keys\n",
              static_cast<long long>(attempts),
              static_cast<long long>(acquisitions), report.keys.size());
}

pid_t spawnWorker(const std::vector<std::string>& args,
                  const char* program = DLM_CONTENTION_WORKER) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  // The worker inherits the environment: PG* variables name the server.
  const int rc =
      posix_spawn(&pid, program, nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << program << ": " << std::strerror(rc);
    return -1;
  }
  return pid;
}

int waitForExit(pid_t pid) {
  int status = 0;
  // EINTR: keep waiting.
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
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
  cli::TempDir dir("dlm-contention");
  // A common start, late enough for every worker to start and connect.
  const std::int64_t startAt =
      cli::steadyNowNs() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(1500ms).count();
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int w = 0; w < kProcesses; ++w) {
    outs.push_back((dir.path() / ("worker-" + std::to_string(w))).string());
    std::vector<std::string> args{"dlm_contention_worker",
                                  "--url",
                                  env->url(),
                                  "--worker",
                                  std::to_string(w + 1),
                                  "--threads",
                                  std::to_string(kThreadsPerProcess),
                                  "--attempts",
                                  std::to_string(kAttemptsPerProcessThread),
                                  "--seconds",
                                  std::to_string(kMaxSeconds),
                                  "--start-at-ns",
                                  std::to_string(startAt),
                                  "--out",
                                  outs.back()};
    if (!env->postgresSchema().empty()) {
      args.push_back("--schema");
      args.push_back(env->postgresSchema());
    }
    pids.push_back(spawnWorker(args));
  }
  std::vector<ContendResult> results;
  for (int w = 0; w < kProcesses; ++w) {
    const pid_t pid = pids[static_cast<std::size_t>(w)];
    if (pid <= 0) continue;
    const int status = waitForExit(pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << w + 1 << " ended with status " << status;
    std::ifstream in(outs[static_cast<std::size_t>(w)]);
    std::string problem;
    auto result = cli::readResult(in, &problem);
    if (!result) {
      ADD_FAILURE() << "worker " << w + 1 << ": " << problem;
      continue;
    }
    results.push_back(std::move(*result));
  }
  ASSERT_EQ(static_cast<int>(results.size()), kProcesses);
  auto manager = makeManager(env->newStore());
  expectMutualExclusion(results, *manager, kMinAcquisitions);
}

// Two processes each hold one lock and ask for the other's: exactly one is
// told DEADLOCK_DETECTED at once, releases, and the other then acquires.
TEST_P(Contention, TwoProcessesInADeadlockOneIsToldAndTheOtherAcquires) {
  auto env = makeEnvironment(GetParam());
  cli::TempDir dir("dlm-deadlock");
  const std::int64_t startAt =
      cli::steadyNowNs() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(1500ms).count();
  const char* holds[2] = {"left", "right"};
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
  EXPECT_LT(loser.second, 1000) << "told within a second";
  EXPECT_EQ(winner.first, "acquired");
  EXPECT_LT(winner.second, 10000) << "well before its 20 s timeout";
}

// A build with neither store has nothing to instantiate.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Contention);
INSTANTIATE_TEST_SUITE_P(Stores, Contention,
                         ::testing::ValuesIn(compiledStores()),
                         [](const auto& info) { return info.param; });

// The manager itself under 16 threads, on the in-memory store: no database,
// so ThreadSanitizer sees the manager's own synchronisation only.
TEST(ContentionOnFakeStore, SixteenThreadsNeverOverlap) {
  auto store = std::make_shared<FakeStore>();
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  for (int i = 0; i < 4; ++i) managers.push_back(makeManager(store));
  const auto results = runThreads(managers, kThreads, kAttemptsPerThread);
  expectMutualExclusion(results, *managers.front(), kMinAcquisitions);
}

// A store that grants every request (exclusion broken on purpose), to prove
// that the scenario and the checker would notice.
class GrantEverythingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
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
  std::vector<cli::Hold> holds;
  for (const auto& r : results) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    holds.insert(holds.end(), r.holds.begin(), r.holds.end());
  }
  const HoldReport report = cli::checkHolds(holds, '.');
  EXPECT_GT(report.overlapCount, 0);
  EXPECT_FALSE(report.ok());
}

}  // namespace
}  // namespace dlm::test
