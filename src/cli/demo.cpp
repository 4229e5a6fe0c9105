// dlmctl demo: worker processes contend for a few locks; the parent checks
// from the recorded holds that no two holders of conflicting keys overlapped.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "commands.h"
#include "output_text.h"
#include "contender.h"
#include "dlm/error.h"
#include "dlm/store_url.h"
#include "dlm/version.h"
#include "hold_log.h"
#include "temp_dir.h"

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;
// The contender loop and the hold checker (src/oracle).
using oracle::checkHolds;
using oracle::ContendOptions;
using oracle::ContendResult;
using oracle::describeProblems;
using oracle::Hold;
using oracle::HoldReport;
using oracle::KeySummary;
using oracle::TempDir;

constexpr const char* kParentKey = "demo";

using DemoSettings = DemoOptions;

// What every worker runs with; only `worker` and `seed` differ.
ContendOptions workerOptions(const DemoSettings& s) {
  ContendOptions o;
  for (int i = 1; i <= s.locks; ++i) {
    // Spread the children's weight so that P% of picks go to the parent.
    o.keys.push_back({fmt::format("{}.key-{}", kParentKey, i),
                      (100 - s.parentPercent) * 1000 / s.locks});
  }
  if (s.parentPercent > 0)
    o.keys.push_back({kParentKey, s.parentPercent * 1000});
  const std::chrono::microseconds hold = milliseconds(s.holdMs);
  o.holdMin = hold / 2;
  o.holdMax = hold * 3 / 2;
  // Gaps between holds give the parent key a chance: it needs every child
  // free at once.
  o.pauseMax = hold / 2;
  // Far above any hold: a lock must never expire while its worker sleeps in
  // it, or another worker could take it over legitimately and the demo
  // would report an overlap that is not a bug.
  o.ttl = std::max<milliseconds>(std::chrono::seconds(30),
                                 milliseconds(s.holdMs) * 20);
  o.timeout = milliseconds(250 + 5 * s.holdMs);
  o.tryPercent = 0;
  // A server that does not answer within operationTimeout for a moment (a
  // busy machine, a checkpoint) fails calls, not the demo: it is about
  // exclusion. The table shows how many.
  o.transientErrorsAllowed = 20;
  return o;
}

LockConfiguration workerConfiguration() {
  LockConfiguration c;
  // Waiters poll often: the demo's holds are short.
  c.sleepBetweenRetries = milliseconds(5);
  return c;
}

// Runs in the forked child and never returns. The child opens its own store:
// database connections must not cross fork().
[[noreturn]] void runWorker(const GlobalOptions& global,
                            const DemoSettings& settings, int worker,
                            std::chrono::steady_clock::time_point startAt,
                            const std::string& resultPath) {
  ContendResult result;
  try {
    auto manager =
        openManager(global, openCliStore(global),
                    /*applyMigrations=*/false, workerConfiguration());
    ContendOptions options = workerOptions(settings);
    options.worker = worker;
    options.seed = static_cast<std::uint64_t>(getpid()) * 7919u +
                   static_cast<std::uint64_t>(worker);
    options.deadline =
        startAt +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(settings.seconds));
    // Everyone starts together, after connecting.
    std::this_thread::sleep_until(startAt);
    result = oracle::contend(*manager, options);
    manager->destroy();
  } catch (const DLMException& e) {
    // Opening the store failed: the parent reports it for this worker.
    result.error = fmt::format("{}: {}", toString(e.code()), e.what());
  } catch (const std::exception& e) {
    // Anything else is reported the same way instead of crashing the child.
    result.error = e.what();
  }
  int status = 0;
  {
    std::ofstream out(resultPath);
    oracle::writeResult(result, out);
    out.flush();
    if (!out) status = 3;
  }
  if (!result.ok()) status = 1;
  // _exit: the child must not run the parent's atexit handlers or flush its
  // copies of the parent's stdio buffers.
  std::_Exit(status);
}

std::string describeExit(int status) {
  if (WIFEXITED(status))
    return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("killed by signal {} ({})", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
  }
  return "stopped";
}

struct WorkerOutcome {
  pid_t pid = 0;
  int status = 0;
  std::optional<ContendResult> result;
  std::string problem;  // why the worker failed; empty when it did not
};

}  // namespace

int runDemo(const GlobalOptions& global, const DemoOptions& settings) {
  std::string storeName;
  int version = 0;
  {
    // Migrate in the parent, and close every connection before forking.
    auto manager = openManager(global, openCliStore(global),
                               /*applyMigrations=*/true, workerConfiguration());
    storeName = std::string(manager->store().name());
    version = requiredSchemaVersion(storeName);
    manager->destroy();
  }
  const std::string parentText =
      settings.parentPercent > 0
          ? fmt::format(" + their parent '{}' ({}% of attempts)", kParentKey,
                        settings.parentPercent)
          : "";
  fmt::print("dlmctl demo: {} worker processes, {} keys{}, {}, holds of ~{}\n",
             settings.workers, settings.locks, parentText,
             formatDuration(milliseconds(
                 static_cast<std::int64_t>(settings.seconds * 1000 + 0.5))),
             formatDuration(milliseconds(settings.holdMs)));
  fmt::print("database: {}\n",
             databaseText(global, storeName,
                          fmt::format("schema version {}", version)));
  fmt::print("client '{}', farm '{}'\n\n", global.client, global.farm);
  std::fflush(stdout);  // or the children would print the buffer again

  TempDir dir("dlmctl-demo");
  // Room for every child to connect before the common start.
  const auto startAt = std::chrono::steady_clock::now() + milliseconds(300);
  const auto started = std::chrono::steady_clock::now();
  std::vector<WorkerOutcome> outcomes(
      static_cast<std::size_t>(settings.workers));
  for (int w = 0; w < settings.workers; ++w) {
    const std::string path =
        (dir.path() / fmt::format("worker-{}", w + 1)).string();
    const pid_t pid = fork();
    if (pid < 0) {
      // Workers already forked still run; wait for them below, then fail.
      outcomes[static_cast<std::size_t>(w)].problem =
          fmt::format("fork failed: {}", std::strerror(errno));
      continue;
    }
    if (pid == 0) runWorker(global, settings, w + 1, startAt, path);
    outcomes[static_cast<std::size_t>(w)].pid = pid;
  }

  std::vector<Hold> holds;
  for (int w = 0; w < settings.workers; ++w) {
    WorkerOutcome& o = outcomes[static_cast<std::size_t>(w)];
    if (o.pid == 0) continue;
    // EINTR: a signal arrived while waiting; keep waiting for this child.
    while (waitpid(o.pid, &o.status, 0) < 0 && errno == EINTR) {
    }
    std::ifstream in(dir.path() / fmt::format("worker-{}", w + 1));
    std::string problem;
    o.result = in ? oracle::readResult(in, &problem) : std::nullopt;
    if (!in) problem = "wrote no result";
    if (!o.result) {
      o.problem = fmt::format("{} ({})", problem, describeExit(o.status));
      continue;
    }
    if (!o.result->error.empty()) {
      o.problem = o.result->error;
    } else if (o.result->failedReleases > 0) {
      o.problem =
          fmt::format("{} releases returned false", o.result->failedReleases);
    } else if (!WIFEXITED(o.status) || WEXITSTATUS(o.status) != 0) {
      o.problem = describeExit(o.status);
    }
    holds.insert(holds.end(), o.result->holds.begin(), o.result->holds.end());
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();

  fmt::print("{:>6}  {:>8}  {:>8}  {:>12}  {:>22}  {}\n", "worker", "pid",
             "attempts", "acquisitions", "failures/timeouts", "result");
  int failedWorkers = 0;
  std::int64_t acquisitions = 0;
  for (int w = 0; w < settings.workers; ++w) {
    const WorkerOutcome& o = outcomes[static_cast<std::size_t>(w)];
    const ContendResult empty;
    const ContendResult& r = o.result ? *o.result : empty;
    acquisitions += r.acquisitions;
    if (!o.problem.empty()) ++failedWorkers;
    fmt::print("{:>6}  {:>8}  {:>8}  {:>12}  {:>22}  {}\n", w + 1, o.pid,
               r.attempts, r.acquisitions, r.unavailable,
               !o.problem.empty()      ? "FAILED: " + o.problem
               : r.transientErrors > 0 ? fmt::format("ok ({} transient store "
                                                     "errors gone through)",
                                                     r.transientErrors)
                                       : std::string("ok"));
  }

  const HoldReport report = checkHolds(holds, '.');
  fmt::print("\n{:<14}  {:>12}  {:>20}  {:>9}  {:>8}\n", "key", "acquisitions",
             "fencing tokens", "in order", "overlaps");
  for (const KeySummary& k : report.keys) {
    fmt::print("{:<14}  {:>12}  {:>20}  {:>9}  {:>8}\n", k.key, k.holds,
               fmt::format("{} .. {}", k.firstFencing, k.lastFencing),
               k.fencingIncreasing ? "yes" : "NO", k.overlaps);
  }
  fmt::print("\n{} acquisitions in {} ({:.0f} per second)\n", acquisitions,
             formatDuration(
                 milliseconds(static_cast<std::int64_t>(elapsed * 1000 + 0.5))),
             acquisitions / std::max(elapsed, 1e-9));
  fmt::print("overlaps: {}\n", report.overlapCount);
  fmt::print("fencing tokens strictly increasing in hold order: {}\n",
             report.fencingViolations.empty() ? "yes" : "NO");
  for (const std::string& line : describeProblems(report)) {
    fmt::print("  {}\n", line);
  }

  std::vector<std::string> failures;
  if (report.overlapCount > 0) failures.push_back("holds overlapped");
  if (!report.fencingViolations.empty()) {
    failures.push_back("fencing tokens went backwards");
  }
  if (!report.failedReleases.empty()) {
    failures.push_back("releases returned false");
  }
  if (failedWorkers > 0) {
    failures.push_back(fmt::format("{} worker(s) failed", failedWorkers));
  }
  if (acquisitions == 0) failures.push_back("nothing was acquired");
  if (failures.empty()) {
    fmt::print("PASS: no two holders of conflicting keys ever overlapped\n");
    return 0;
  }
  std::string text;
  for (const auto& f : failures) text += (text.empty() ? "" : "; ") + f;
  fmt::print("FAIL: {}\n", text);
  return 1;
}

}  // namespace dlm::cli
