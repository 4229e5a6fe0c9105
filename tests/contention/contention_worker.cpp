// A contention worker process: opens its own store on the database the test
// names, runs a scenario on a few threads from a common start time and
// writes every hold to a result file for the test to check.
//
//   dlm_contention_worker --url URL [--schema S] --worker N --threads T
//       --attempts A --seconds S --start-at-ns NS --out FILE
//       [--scenario mixed|readers|fairness] [--writer KEY]... [--key KEY]
//       [--target-holds H [--writer-target-holds W] --reached-file R
//        --stop-file F]
//
// mixed (default): T threads on scenarioKeys(), A attempts each.
// readers: T reader threads on readerKeys(), plus one writer thread per
//   --writer KEY, until the run ends (A is ignored).
// fairness: T threads looping on --key with fairnessOptions() until the
//   run ends (A is ignored).
// A run ends after S seconds, or earlier once F exists. With H, the worker
// creates R once every one of its threads has had H holds (a readers run's
// writer threads W, default H), and goes on: the
// parent makes F when every worker has made its R, so the run lasts until
// there is enough to judge, however slow the machine is.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "contender.h"
#include "contention/scenario.h"
#include "contention/signal_file.h"
#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "dlm/store_url.h"

namespace {

using dlm::oracle::ContendResult;

struct Plan {
  std::string scenario = "mixed";
  int worker = 0;
  int threads = 1;
  std::int64_t attempts = 1;
  std::vector<std::string> writers;  // readers: one writer thread per key
  std::string key;                   // fairness: the key of every thread
  std::int64_t targetHolds = 0;      // per thread; 0: no target
  std::int64_t writerTargetHolds = 0;  // readers' writer threads; 0: H
  std::string reachedFile;           // made once every thread reached it
  std::string stopFile;              // its existence ends the run
};

// Thread `t`'s loop under `plan`.
dlm::oracle::ContendOptions optionsFor(
    const Plan& plan, int t, std::chrono::steady_clock::time_point deadline) {
  using namespace dlm::test::contention;
  const int id = plan.worker * 100 + t;
  if (plan.scenario == "readers") {
    if (t < plan.threads) return readerOptions(id, deadline);
    return writerOptions(
        id, plan.writers[static_cast<std::size_t>(t - plan.threads)], deadline);
  }
  if (plan.scenario == "fairness") {
    return fairnessOptions(id, plan.key, deadline);
  }
  return scenarioOptions(id, plan.attempts, deadline);
}

// The store `url` names; a SQLite one waits up to kTestStoreBudget for the
// file's write lock (the runs judge exclusion, not speed).
std::shared_ptr<dlm::LockStore> openStore(const std::string& url,
                                          const std::string& schema) {
#ifdef DLM_WITH_SQLITE
  const dlm::ParsedStoreUrl parsed = dlm::parseStoreUrl(url);
  if (parsed.kind == dlm::StoreKind::SQLITE) {
    dlm::SqliteStoreOptions options{parsed.location};
    options.busyTimeout = dlm::test::kTestStoreBudget;
    return std::make_shared<dlm::SqliteStore>(options);
  }
#endif
  return dlm::openStore(url, schema);
}

ContendResult runThreads(const std::string& url, const std::string& schema,
                         const Plan& plan, double seconds,
                         std::int64_t startAtNs) {
  using namespace dlm::test::contention;
  auto manager =
      dlm::DistributedLockManager::builder()
          .clientId(kClient)
          .farmId(kFarm)
          .store(openStore(url, schema))
          .configuration(plan.scenario == "fairness" ? fairnessConfiguration()
                                                     : scenarioConfiguration())
          .build();
  manager->initialize();

  const auto window = dlm::test::contention::runWindow(startAtNs, seconds);
  const auto startAt = window.startAt;
  const auto deadline = window.deadline;
  const int threads =
      plan.threads +
      static_cast<int>(plan.scenario == "readers" ? plan.writers.size() : 0);
  std::vector<ContendResult> results(static_cast<std::size_t>(threads));
  std::atomic<int> reached{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto options = optionsFor(plan, t, deadline);
      if (!plan.stopFile.empty()) {
        options.stopRequested = [&plan] {
          return dlm::test::contention::signalFileRaised(plan.stopFile);
        };
      }
      if (plan.targetHolds > 0) {
        const bool writer =
            plan.scenario == "readers" && t >= plan.threads;
        options.targetHolds = writer && plan.writerTargetHolds > 0
                                  ? plan.writerTargetHolds
                                  : plan.targetHolds;
        options.onTarget = [&] {
          if (++reached == threads) {
            dlm::test::contention::raiseSignalFile(plan.reachedFile);
          }
        };
      }
      std::this_thread::sleep_until(startAt);
      results[static_cast<std::size_t>(t)] =
          dlm::oracle::contend(*manager, options);
    });
  }
  for (auto& th : pool) th.join();
  manager->destroy();

  ContendResult merged;
  for (auto& r : results) {
    merged.attempts += r.attempts;
    merged.acquisitions += r.acquisitions;
    merged.unavailable += r.unavailable;
    merged.failedReleases += r.failedReleases;
    if (merged.error.empty()) merged.error = r.error;
    merged.holds.insert(merged.holds.end(), r.holds.begin(), r.holds.end());
  }
  return merged;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one contention worker process"};
  std::string url, schema, out;
  Plan plan;
  std::int64_t startAtNs = 0;
  double seconds = 1;
  app.add_option("--url", url)->required();
  app.add_option("--schema", schema);
  app.add_option("--worker", plan.worker)
      ->required()
      ->check(CLI::Range(0, 9999));
  app.add_option("--threads", plan.threads)
      ->required()
      ->check(CLI::Range(1, 99));
  app.add_option("--scenario", plan.scenario)
      ->check(CLI::IsMember({"mixed", "readers", "fairness"}));
  app.add_option("--writer", plan.writers);
  app.add_option("--key", plan.key);
  app.add_option("--attempts", plan.attempts)
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--seconds", seconds)
      ->required()
      ->check(CLI::Range(0.01, 3600.0));
  app.add_option("--start-at-ns", startAtNs)->required();
  app.add_option("--out", out)->required();
  app.add_option("--target-holds", plan.targetHolds)
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--writer-target-holds", plan.writerTargetHolds)
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--reached-file", plan.reachedFile);
  app.add_option("--stop-file", plan.stopFile);
  // A bad command line from the test: no result file to write.
  CLI11_PARSE(app, argc, argv);
  if (plan.scenario == "fairness" && plan.key.empty()) {
    std::fprintf(stderr, "dlm_contention_worker: fairness needs --key\n");
    return 2;
  }
  if (plan.targetHolds > 0 && plan.reachedFile.empty()) {
    std::fprintf(stderr, "dlm_contention_worker: --target-holds needs "
                         "--reached-file\n");
    return 2;
  }
  if (plan.threads + static_cast<int>(plan.writers.size()) > 99) {
    std::fprintf(stderr, "dlm_contention_worker: at most 99 threads\n");
    return 2;
  }
  ContendResult result;
  try {
    result = runThreads(url, schema, plan, seconds, startAtNs);
  } catch (const dlm::DLMException& e) {
    // Opening or initializing the store failed: report it in the result.
    result.error = std::string(dlm::toString(e.code())) + ": " + e.what();
  }
  std::ofstream file(out);
  dlm::oracle::writeResult(result, file);
  file.flush();
  if (!file) {
    std::fprintf(stderr, "dlm_contention_worker: cannot write %s\n",
                 out.c_str());
    return 3;
  }
  if (!result.error.empty()) {
    std::fprintf(stderr, "dlm_contention_worker %s\n", result.error.c_str());
  }
  return result.ok() ? 0 : 1;
}
