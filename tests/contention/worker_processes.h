// Runs dlm_contention_worker processes on one database from a common start
// instant and reads their hold logs back. Shared by the contention tests and
// dlm_fairness.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "contender.h"

namespace dlm::test::contention {

// Spawns `program` with `args` (args[0] is its name), inheriting the
// environment (PG* variables name the server). Returns the pid, or -1 with
// `problem` set.
pid_t spawnProcess(const char* program, const std::vector<std::string>& args,
                   std::string* problem);
// Waits for `pid` (through EINTR) and returns its wait status.
int waitForExit(pid_t pid);

// How long a run lasts: until every thread of every worker has had
// `targetHolds` holds (then the parent tells them all to stop), or, with no
// target, until each worker has made its attempts; in either case no longer
// than `maxSeconds` (a deadline that only a broken or starved run meets).
struct RunUntil {
  std::int64_t targetHolds = 0;
  double maxSeconds = 60;
};

struct ProcessRun {
  std::int64_t startAtNs = 0;  // steady_clock: when the workers began
  // When the parent told the workers to stop (every one had reached its
  // target), or the deadline: every thread was still contending until then.
  std::int64_t stopNs = 0;
  bool reachedTargets = false;  // the run stopped because all reached theirs
  // One per worker, in order; a worker that failed leaves an empty result
  // with its error set.
  std::vector<oracle::ContendResult> results;
  // Everything that went wrong (spawn, exit status, unreadable result).
  std::vector<std::string> problems;
};

// Spawns one dlm_contention_worker per entry of `perWorker` (worker numbers
// 1, 2, ...; each entry adds its scenario options, e.g. {"--scenario",
// "fairness", "--key", "p", "--threads", "1"}) on the database `url` /
// `schema`, all starting 1.5 s from now and contending as `until` says;
// result and signal files go to `dir`. Waits for every worker.
ProcessRun runWorkerProcesses(
    const std::string& url, const std::string& schema,
    const std::vector<std::vector<std::string>>& perWorker, RunUntil until,
    const std::string& dir);

}  // namespace dlm::test::contention
