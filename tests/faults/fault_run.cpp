#include "faults/fault_run.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "contention/signal_file.h"
#include "faults/fault_scenario.h"

extern char** environ;

namespace dlm::test::faults {
namespace {

std::int64_t toNs(std::chrono::nanoseconds d) { return d.count(); }

double toMs(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

WorkerFleet::WorkerFleet(FleetOptions options)
    : options_(std::move(options)), dir_("dlm-faults") {
  startAtNs_ = oracle::steadyNowNs() + toNs(options_.startDelay);
  stopFile_ = dir_.file("stop");
  for (int w = 0; w < options_.workers; ++w) {
    outs_.push_back(dir_.file("worker-" + std::to_string(w)));
    std::vector<std::string> args{
        "dlm_fault_worker",
        "--url",
        options_.url,
        "--schema",
        options_.schema,
        "--worker",
        std::to_string(w + 1),
        "--threads",
        std::to_string(options_.threadsPerWorker),
        "--seconds",
        fmt::format("{:.3f}", options_.seconds),
        "--start-at-ns",
        std::to_string(startAtNs_),
        "--op-timeout-ms",
        std::to_string(options_.operationTimeout.count()),
        "--out",
        outs_.back(),
        "--stop-file",
        stopFile_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    // The worker inherits the environment: PG* variables name the server.
    const int rc = posix_spawn(&pid, DLM_FAULT_WORKER, nullptr, nullptr,
                               argv.data(), environ);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << DLM_FAULT_WORKER << ": "
                    << std::strerror(rc);
      pid = -1;
    }
    pids_.push_back(pid);
  }
}

WorkerFleet::~WorkerFleet() {
  for (pid_t pid : pids_) {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
}

void WorkerFleet::stop() {
  if (stoppedAtNs_ != 0) return;
  stoppedAtNs_ = oracle::steadyNowNs();
  contention::raiseSignalFile(stopFile_);
}

std::int64_t WorkerFleet::endAtNs() const {
  const std::int64_t latest =
      startAtNs_ + toNs(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::duration<double>(options_.seconds)));
  return stoppedAtNs_ != 0 ? std::min(stoppedAtNs_, latest) : latest;
}

std::vector<WorkerLog> WorkerFleet::collect(std::vector<std::string>& problems,
                                            std::chrono::seconds grace) {
  stop();
  const std::int64_t killAt = endAtNs() + toNs(grace);
  std::vector<WorkerLog> logs;
  for (std::size_t w = 0; w < pids_.size(); ++w) {
    const pid_t pid = pids_[w];
    if (pid <= 0) continue;
    int status = 0;
    // Bounded: a worker hung in a call past the grace period is killed, and
    // that is itself a finding (a call that did not return).
    for (;;) {
      const pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid || (r < 0 && errno != EINTR)) break;
      if (oracle::steadyNowNs() >= killAt) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        problems.push_back(fmt::format(
            "worker {} still running {} s after the run ended: killed", w + 1,
            grace.count()));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pids_[w] = -1;
    std::ifstream in(outs_[w]);
    std::string problem;
    auto log = readLog(in, &problem);
    if (!log) {
      problems.push_back(
          fmt::format("worker {}: {} (status {})", w + 1, problem, status));
      continue;
    }
    if (!log->fatal.empty()) {
      problems.push_back(fmt::format("worker {}: {}", w + 1, log->fatal));
    }
    logs.push_back(std::move(*log));
  }
  return logs;
}

std::int64_t waitForStoreAcquisitions(
    const std::function<std::unique_ptr<pqxx::connection>()>& connect,
    const std::string& schema, std::int64_t atLeast,
    std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::unique_ptr<pqxx::connection> admin;
  std::int64_t seen = -1;
  for (;;) {
    try {
      if (!admin) admin = connect();
      seen = storeAcquisitions(*admin, schema);
      if (seen >= atLeast) return seen;
    } catch (const std::exception&) {
      admin.reset();  // the server is restarting or failing over: again
    }
    if (std::chrono::steady_clock::now() >= until) return seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

RunFigures summarise(const std::vector<WorkerLog>& logs,
                     std::chrono::milliseconds operationTimeout,
                     std::chrono::milliseconds schedulingSlack) {
  static const std::set<std::string> kAllowed = {
      "OK", "FALSE_AFTER_TTL", "LOCK_UNAVAILABLE", "CONNECTION_ERROR",
      "RETRIES_EXHAUSTED",
      // Not an error code; expectSafeAndBounded checks it on its own.
      "FALSE"};
  const double opMs = static_cast<double>(operationTimeout.count() +
                                          schedulingSlack.count());
  RunFigures f;
  f.byKind["try"].boundMs = opMs + 1000;
  f.byKind["release"].boundMs = opMs + 1000;
  f.byKind["acquire"].boundMs =
      static_cast<double>(kWorkerAcquireTimeout.count()) + opMs + 1000;
  std::vector<oracle::Hold> holds;
  for (const auto& log : logs) {
    for (const auto& c : log.calls) {
      ++f.calls;
      ++f.outcomes[c.outcome];
      if (!kAllowed.count(c.outcome)) ++f.unexpectedErrors;
      CallStats& s = f.byKind[c.kind];
      ++s.calls;
      const double ms = toMs(c.durationNs());
      s.maxMs = std::max(s.maxMs, ms);
      if (ms > s.boundMs) ++s.overBound;
    }
    holds.insert(holds.end(), log.holds.begin(), log.holds.end());
    for (const auto& m : log.messages) f.problems.push_back(m);
  }
  f.holds = static_cast<std::int64_t>(holds.size());
  for (const auto& h : holds) f.unreleased += h.released ? 0 : 1;
  const oracle::HoldReport report = oracle::checkHolds(holds, '.');
  f.overlaps = report.overlapCount;
  f.fencingViolations =
      static_cast<std::int64_t>(report.fencingViolations.size());
  // Unreleased holds are reported as figures, not as checker problems.
  oracle::HoldReport listed = report;
  listed.failedReleases.clear();
  for (const auto& line : oracle::describeProblems(listed)) {
    f.problems.push_back(line);
  }
  return f;
}

std::optional<std::int64_t> firstAcquireAfter(
    const std::vector<WorkerLog>& logs, std::int64_t afterNs) {
  std::optional<std::int64_t> first;
  for (const auto& log : logs) {
    for (const auto& c : log.calls) {
      if (c.kind == "release" || c.outcome != "OK" || c.endNs <= afterNs) {
        continue;
      }
      if (!first || c.endNs < *first) first = c.endNs;
    }
  }
  return first;
}

std::int64_t storeAcquisitions(pqxx::connection& admin,
                               const std::string& schema) {
  // Only the workers' keys: a test's own locks (probes) share the schema.
  const std::string prefix =
      fmt::format("DC#{}#{}#", contention::kFarm, contention::kClient);
  pqxx::nontransaction tx(admin);
  const auto r = tx.exec_params(
      "SELECT coalesce(sum(fencing_token), 0)::bigint FROM " +
          tx.quote_name(schema) + ".dlm_locks WHERE starts_with(resource, $1)",
      prefix);
  return r[0][0].as<std::int64_t>();
}

std::string figuresText(const RunFigures& f) {
  std::string text = fmt::format(
      "calls={} holds={} overlaps={} fencing_violations={} unreleased={}",
      f.calls, f.holds, f.overlaps, f.fencingViolations, f.unreleased);
  if (f.storeAcquisitions >= 0) {
    text += fmt::format(" store_acquisitions={} (unreported to callers: {})",
                        f.storeAcquisitions, f.storeAcquisitions - f.holds);
  }
  for (const char* kind : {"try", "acquire", "release"}) {
    const auto it = f.byKind.find(kind);
    if (it == f.byKind.end()) continue;
    text +=
        fmt::format(" max_{}={:.0f}ms/bound {:.0f}ms (over: {})", kind,
                    it->second.maxMs, it->second.boundMs, it->second.overBound);
  }
  text += " outcomes:";
  for (const auto& [name, count] : f.outcomes) {
    text += fmt::format(" {}={}", name, count);
  }
  return text;
}

void expectSafeAndBounded(const RunFigures& f, std::int64_t minHolds) {
  std::string problems;
  for (const auto& p : f.problems) problems += "\n  " + p;
  EXPECT_EQ(f.overlaps, 0) << "holds of conflicting keys overlapped"
                           << problems;
  EXPECT_EQ(f.fencingViolations, 0)
      << "a key's fencing token did not grow" << problems;
  const auto falses = f.outcomes.find("FALSE");
  EXPECT_EQ(falses == f.outcomes.end() ? 0 : falses->second, 0)
      << "releaseLock returned false for locks it held well inside their "
         "TTL (a release whose reply was lost, retried, and then not "
         "recognised as its own?)";
  EXPECT_EQ(f.unexpectedErrors, 0)
      << "errors other than LOCK_UNAVAILABLE, CONNECTION_ERROR, "
         "RETRIES_EXHAUSTED: "
      << figuresText(f) << problems;
  for (const auto& [kind, s] : f.byKind) {
    EXPECT_EQ(s.overBound, 0)
        << s.overBound << " " << kind << " call(s) over their bound of "
        << s.boundMs << " ms, the longest " << s.maxMs << " ms";
  }
  EXPECT_GE(f.holds, minHolds) << "too few holds to prove anything";
  if (f.storeAcquisitions >= 0) {
    EXPECT_GE(f.storeAcquisitions, f.holds)
        << "callers held locks the store has no acquisition for (lost "
           "acquires: a second holder could have been let in)";
  }
}

}  // namespace dlm::test::faults
