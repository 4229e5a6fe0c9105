// A contention worker process: opens its own store on the database the test
// names, runs the scenario on a few threads from a common start time and
// writes every hold to a result file for the test to check.
//
//   dlm_contention_worker --url URL [--schema S] --worker N --threads T
//       --attempts A --seconds S --start-at-ns NS --out FILE
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "cli/cli_args.h"
#include "cli/contender.h"
#include "contention/scenario.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"

namespace {

using dlm::cli::Args;
using dlm::cli::ContendResult;

std::string required(Args& args, const std::string& name) {
  auto value = args.take(name);
  if (!value) throw dlm::cli::UsageError(name + " is required");
  return *value;
}

ContendResult runThreads(const std::string& url, const std::string& schema,
                         int worker, int threads, std::int64_t attempts,
                         double seconds, std::int64_t startAtNs) {
  using namespace dlm::test::contention;
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId(kClient)
                     .farmId(kFarm)
                     .store(dlm::openStore(url, schema))
                     .configuration(scenarioConfiguration())
                     .build();
  manager->initialize();

  const auto window = dlm::test::contention::runWindow(startAtNs, seconds);
  const auto startAt = window.startAt;
  const auto deadline = window.deadline;
  std::vector<ContendResult> results(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::this_thread::sleep_until(startAt);
      results[static_cast<std::size_t>(t)] = dlm::cli::contend(
          *manager, scenarioOptions(worker * 100 + t, attempts, deadline));
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
  Args args(std::vector<std::string>(argv + 1, argv + argc));
  std::string out;
  ContendResult result;
  try {
    const std::string url = required(args, "--url");
    const std::string schema = args.take("--schema").value_or("");
    const int worker = static_cast<int>(dlm::cli::parseInteger(
        "--worker", required(args, "--worker"), 0, 9999));
    const int threads = static_cast<int>(dlm::cli::parseInteger(
        "--threads", required(args, "--threads"), 1, 256));
    const std::int64_t attempts = dlm::cli::parseInteger(
        "--attempts", required(args, "--attempts"), 1, 1'000'000);
    const double seconds = dlm::cli::parseDecimal(
        "--seconds", required(args, "--seconds"), 0.01, 3600);
    const std::int64_t startAtNs = dlm::cli::parseInteger(
        "--start-at-ns", required(args, "--start-at-ns"), 0, INT64_MAX);
    out = required(args, "--out");
    args.requireEmpty();
    result =
        runThreads(url, schema, worker, threads, attempts, seconds, startAtNs);
  } catch (const dlm::cli::UsageError& e) {
    // The test built a bad command line: no result file to write.
    std::fprintf(stderr, "dlm_contention_worker: %s\n", e.what());
    return 2;
  } catch (const dlm::DLMException& e) {
    // Opening or initializing the store failed: report it in the result.
    result.error = std::string(dlm::toString(e.code())) + ": " + e.what();
  }
  std::ofstream file(out);
  dlm::cli::writeResult(result, file);
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
