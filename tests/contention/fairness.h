// The fairness run: three processes on one database loop
// acquireLock / hold 1 ms / release on "p", "p.c" and "p.c.d" (one key
// each, all on one path, so every hold excludes the others). Fair means
// that every process gets a fair part of the holds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "contention/worker_processes.h"
#include "hold_log.h"

namespace dlm::test::contention {

struct FairnessRun {
  // Per process (the order of fairnessKeys()): holds that began before the
  // run was told to stop. A waiter that was stuck then gets the lock once
  // the others stop; that hold proves nothing and is not counted.
  std::vector<std::int64_t> holds;
  std::int64_t total = 0;
  // Every process reached the run's target of holds (RunUntil).
  bool reachedTargets = false;
  // The whole log checked: no two holds overlapped, tokens grew.
  oracle::HoldReport report;
  // Worker failures (spawn, exit status, errors).
  std::vector<std::string> problems;

  // holds[i] / total, 0 when nothing was held.
  double share(std::size_t process) const;
  // The smallest share.
  double minShare() const;
};

// One run on the database `url` / `schema`, as long as `until` says (a
// target of holds per process, or a fixed time with none); `dir` takes the
// workers' result files.
FairnessRun runFairness(const std::string& url, const std::string& schema,
                        RunUntil until, const std::string& dir);

// "p 34.1% (1021)  p.c 32.9% (985)  p.c.d 33.0% (990)  min 32.9%  total
// 2996": one line, easy to paste.
std::string describeShares(const FairnessRun& run);

}  // namespace dlm::test::contention
