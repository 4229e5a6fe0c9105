// A multi-process contention run under faults: starts dlm_fault_worker
// processes on one database, collects their logs, and reduces them to the
// figures every fault test prints and checks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "faults/fault_log.h"

namespace dlm::test::faults {

struct FleetOptions {
  std::string url;     // the database, as dlm::openStore takes it
  std::string schema;  // PostgreSQL schema of dlm's tables
  int workers = 4;
  int threadsPerWorker = 2;
  // The longest a run may last: the test ends it with stop() once it has
  // seen enough (a number of acquisitions after the fault), so this only
  // ends a run that never gets there.
  double seconds = 90;
  // Workers start together this long after start(): time to connect.
  std::chrono::milliseconds startDelay{1500};
  std::chrono::milliseconds operationTimeout{2000};
};

// The worker processes of one run. The destructor kills workers still
// running (a failed assertion must not leave them behind).
class WorkerFleet {
 public:
  explicit WorkerFleet(FleetOptions options);
  ~WorkerFleet();
  WorkerFleet(const WorkerFleet&) = delete;
  WorkerFleet& operator=(const WorkerFleet&) = delete;

  // The instant (steady_clock ns) at which the workers start contending.
  std::int64_t startAtNs() const { return startAtNs_; }
  // Tells every worker to finish its current call and end (their calls
  // made until then are the run); idempotent.
  void stop();
  // When stop() was called, or the latest end of the run without it.
  std::int64_t endAtNs() const;
  // Stops the run (stop()), waits for every worker (killing those still
  // running `grace` after that) and returns their logs; problems (a worker that failed
  // or left no log) are added to `problems`.
  std::vector<WorkerLog> collect(
      std::vector<std::string>& problems,
      std::chrono::seconds grace = std::chrono::seconds(30));

 private:
  FleetOptions options_;
  oracle::TempDir dir_;
  std::int64_t startAtNs_ = 0;
  std::int64_t stoppedAtNs_ = 0;
  std::string stopFile_;
  std::vector<pid_t> pids_;
  std::vector<std::string> outs_;
};

struct CallStats {
  std::int64_t calls = 0;
  double maxMs = 0;
  double boundMs = 0;
  std::int64_t overBound = 0;
};

struct RunFigures {
  std::int64_t calls = 0;
  std::int64_t holds = 0;
  std::int64_t overlaps = 0;
  std::int64_t fencingViolations = 0;
  // releaseLock returned false, or never answered before the run ended.
  std::int64_t unreleased = 0;
  std::map<std::string, std::int64_t> outcomes;  // by outcome name
  std::map<std::string, CallStats> byKind;       // "try", "acquire", "release"
  // Errors other than LOCK_UNAVAILABLE, CONNECTION_ERROR and
  // RETRIES_EXHAUSTED (every one is a test failure; so is a FALSE outcome,
  // counted in `outcomes`).
  std::int64_t unexpectedErrors = 0;
  std::vector<std::string> problems;  // checker and worker messages
  // Acquisitions the store counted (the sum of the rows' fencing tokens on a
  // fresh schema), -1 when not read. Fewer than `holds`: a hold the store
  // lost (two holders possible); more: acquisitions whose caller was told
  // they failed (reply lost), left held in the store until their TTL.
  std::int64_t storeAcquisitions = -1;
};

// The sum of the fencing tokens of the workers' rows in `schema`'s
// dlm_locks: every acquisition of theirs the store committed, on a schema
// created for the run.
std::int64_t storeAcquisitions(pqxx::connection& admin,
                               const std::string& schema);

// Polls the store's acquisitions of the workers' keys (storeAcquisitions)
// until there are at least `atLeast`, or `limit` has passed; reconnects with
// `connect` after an error (the server may be restarting). The count last
// read, -1 when none could be.
std::int64_t waitForStoreAcquisitions(
    const std::function<std::unique_ptr<pqxx::connection>()>& connect,
    const std::string& schema, std::int64_t atLeast,
    std::chrono::milliseconds limit);

// Bounds: tryAcquireLock and releaseLock operationTimeout + 1 s, acquireLock
// its timeout + operationTimeout + 1 s; each plus `schedulingSlack` (what
// this machine adds when it is busy: support/scheduling_lag.h).
RunFigures summarise(const std::vector<WorkerLog>& logs,
                     std::chrono::milliseconds operationTimeout,
                     std::chrono::milliseconds schedulingSlack);

// The end (steady ns) of the first successful acquire that ended after
// `afterNs`; nullopt when there was none.
std::optional<std::int64_t> firstAcquireAfter(
    const std::vector<WorkerLog>& logs, std::int64_t afterNs);

// "calls=... holds=... overlaps=0 fencing_violations=0 max try 12ms/2000ms
// ... errors: CONNECTION_ERROR=3 ...": the figures part of a summary line.
std::string figuresText(const RunFigures& figures);

// The checks every contention-under-faults test makes: no overlap, fencing
// tokens strictly increasing, only the allowed error codes, no release
// answered false inside its TTL, every call within its bound, and enough
// holds to prove something (the test runs the fleet until the store has
// counted that many: a count, not a rate).
void expectSafeAndBounded(const RunFigures& figures, std::int64_t minHolds);

}  // namespace dlm::test::faults
