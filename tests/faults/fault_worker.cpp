// A fault-run worker process: contends for the contention scenario's keys on
// a few threads, like dlm_contention_worker, but keeps going through errors
// (a restarting or killed server is what the test is about) and logs every
// call with its duration and outcome, and every hold.
//
//   dlm_fault_worker --url URL --schema S --worker N --threads T
//       --seconds S --start-at-ns NS --op-timeout-ms MS --out FILE
//       [--stop-file F]
//
// It contends for S seconds, or until F exists: the test ends the run once
// it has seen what it needs, however slow the machine.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "hold_log.h"
#include "contention/scenario.h"
#include "contention/signal_file.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"
#include "faults/fault_log.h"
#include "faults/fault_scenario.h"

namespace {

using dlm::test::faults::CallRecord;
using dlm::test::faults::WorkerLog;
using std::chrono::milliseconds;

// Runs one call, logs it, and returns its outcome.
template <typename Fn>
std::string logged(WorkerLog& log, const char* kind, Fn&& fn) {
  CallRecord record;
  record.kind = kind;
  record.startNs = dlm::oracle::steadyNowNs();
  std::string message;
  try {
    record.outcome = fn() ? "OK" : "FALSE";
  } catch (const dlm::DLMException& e) {
    record.outcome = std::string(dlm::toString(e.code()));
    message = e.what();
  } catch (const std::exception& e) {
    // The API promises DLMException only; the test counts these as failures.
    record.outcome = "NOT_DLM";
    message = e.what();
  }
  record.endNs = dlm::oracle::steadyNowNs();
  if (!message.empty() && record.outcome != "LOCK_UNAVAILABLE") {
    int same = 0;
    for (const auto& m : log.messages) same += m.rfind(record.outcome, 0) == 0;
    if (same < 3) {
      log.messages.push_back(record.outcome + " from " + kind + ": " + message);
    }
  }
  log.calls.push_back(record);
  return record.outcome;
}

// Whether the run is over: its deadline passed or the stop file exists.
struct RunEnd {
  std::chrono::steady_clock::time_point deadline;
  std::string stopFile;
  bool reached() const {
    return std::chrono::steady_clock::now() >= deadline ||
           (!stopFile.empty() &&
            dlm::test::contention::signalFileRaised(stopFile));
  }
};

// One thread's loop until the run ends. A failed release is repeated (the
// lock is still held, the API says so) until it answers or the run ends.
WorkerLog contend(dlm::DistributedLockManager& manager, int worker,
                  const RunEnd& end) {
  namespace fs = dlm::test::faults;
  WorkerLog log;
  std::mt19937_64 rng(0x9E3779B97F4A7C15ull *
                      static_cast<unsigned>(worker + 1));
  const auto keys = dlm::test::contention::scenarioKeys();
  std::vector<int> weights;
  std::vector<dlm::Lock> locks;
  for (const auto& k : keys) {
    weights.push_back(k.weight);
    locks.push_back(manager.getLockInstance(k.id, dlm::LockLevel::DC));
  }
  std::discrete_distribution<std::size_t> pickKey(weights.begin(),
                                                  weights.end());
  std::uniform_int_distribution<int> percent(0, 99);
  std::uniform_int_distribution<int> holdUs(0, 2000);

  while (!end.reached()) {
    dlm::Lock& lock = locks[pickKey(rng)];
    const bool useTry = percent(rng) < 50;
    const std::int64_t callStart = dlm::oracle::steadyNowNs();
    const std::string got =
        useTry ? logged(log, "try",
                        [&] {
                          manager.tryAcquireLock(lock, fs::kWorkerTtl);
                          return true;
                        })
               : logged(log, "acquire", [&] {
                   manager.acquireLock(lock, fs::kWorkerTtl,
                                       fs::kWorkerAcquireTimeout);
                   return true;
                 });
    if (got != "OK") {
      // Busy key: try another at once; a failing store: do not spin on it.
      if (got != "LOCK_UNAVAILABLE") {
        std::this_thread::sleep_for(milliseconds(20));
      }
      continue;
    }
    dlm::oracle::Hold hold;
    hold.startNs = dlm::oracle::steadyNowNs();
    hold.key = lock.id();
    hold.worker = worker;
    hold.fencing = lock.fencingToken();
    std::this_thread::sleep_for(std::chrono::microseconds(holdUs(rng)));
    std::string released;
    for (;;) {
      hold.endNs = dlm::oracle::steadyNowNs();
      released =
          logged(log, "release", [&] { return manager.releaseLock(lock); });
      if (released == "OK" || released == "FALSE") break;
      if (end.reached()) break;
      std::this_thread::sleep_for(milliseconds(20));
    }
    hold.released = released == "OK";
    // false is the right answer only for a lease that ran out (and was taken
    // over); for one still inside its TTL it means the library lost track
    // of its own release (e.g. retried one whose reply was lost).
    const auto ttlNs =
        std::chrono::duration_cast<std::chrono::nanoseconds>(fs::kWorkerTtl)
            .count();
    if (released == "FALSE" && dlm::oracle::steadyNowNs() - callStart >= ttlNs) {
      log.calls.back().outcome = "FALSE_AFTER_TTL";
    }
    // The store let the lease end at its TTL whatever the client did; a hold
    // is only claimed up to then (the acquire call started before the lease
    // did), so a legitimate takeover after expiry is not an overlap.
    const std::int64_t leaseEnd = callStart + ttlNs;
    hold.endNs = std::min(hold.endNs, leaseEnd);
    log.holds.push_back(hold);
  }
  return log;
}

WorkerLog run(const std::string& url, const std::string& schema, int worker,
              int threads, double seconds, std::int64_t startAtNs,
              milliseconds operationTimeout, const std::string& stopFile) {
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId(dlm::test::contention::kClient)
                     .farmId(dlm::test::contention::kFarm)
                     .store(dlm::openStore(url, schema))
                     .configuration(dlm::test::faults::workerConfiguration(
                         operationTimeout))
                     .build();
  manager->initialize();
  const auto window = dlm::test::contention::runWindow(startAtNs, seconds);
  const auto startAt = window.startAt;
  const RunEnd end{window.deadline, stopFile};
  std::vector<WorkerLog> logs(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::this_thread::sleep_until(startAt);
      logs[static_cast<std::size_t>(t)] =
          contend(*manager, worker * 100 + t, end);
    });
  }
  for (auto& th : pool) th.join();
  manager->destroy();
  WorkerLog merged;
  for (auto& l : logs) {
    merged.calls.insert(merged.calls.end(), l.calls.begin(), l.calls.end());
    merged.holds.insert(merged.holds.end(), l.holds.begin(), l.holds.end());
    merged.messages.insert(merged.messages.end(), l.messages.begin(),
                           l.messages.end());
  }
  return merged;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one fault-test worker process"};
  std::string url, schema, out, stopFile;
  int worker = 0, threads = 1;
  double seconds = 1;
  std::int64_t startAtNs = 0, opTimeoutMs = 1;
  app.add_option("--url", url)->required();
  app.add_option("--schema", schema);
  app.add_option("--worker", worker)->required()->check(CLI::Range(0, 9999));
  app.add_option("--threads", threads)->required()->check(CLI::Range(1, 64));
  app.add_option("--seconds", seconds)
      ->required()
      ->check(CLI::Range(0.01, 600.0));
  app.add_option("--start-at-ns", startAtNs)->required();
  app.add_option("--op-timeout-ms", opTimeoutMs)
      ->required()
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{3'600'000}));
  app.add_option("--out", out)->required();
  app.add_option("--stop-file", stopFile);
  // A bad command line from the test: no log to write.
  CLI11_PARSE(app, argc, argv);
  WorkerLog log;
  try {
    log = run(url, schema, worker, threads, seconds, startAtNs,
              milliseconds(opTimeoutMs), stopFile);
  } catch (const std::exception& e) {
    // initialize() failed, or the loop threw: the test reports it.
    log.fatal = e.what();
  }
  std::ofstream file(out);
  dlm::test::faults::writeLog(log, file);
  file.flush();
  if (!file) {
    std::fprintf(stderr, "dlm_fault_worker: cannot write %s\n", out.c_str());
    return 3;
  }
  return log.fatal.empty() ? 0 : 1;
}
