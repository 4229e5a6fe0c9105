// The workloads of dlm_bench, per store.
#pragma once

#include <dlm/dlm.h>

#include <string>
#include <vector>

#include "bench_util.h"

namespace dlm_bench {

// PostgreSQL: cycle (+ baselines a-d), roundtrips, contended, handoff, scale,
// readers.
// Creates (after dropping) the database flags.dbName and flags.dbName_rt.
void runPostgres(const Flags& flags, Report& report, Machine& machine);

// SQLite: cycle (+ raw sqlite3 baseline), handoff, procs, readers, junk,
// guard.
void runSqlite(const Flags& flags, Report& report, Machine& machine);

// SQLite: an application transaction with and without guardWithin
// (sqlite_guard.cpp).
void runGuardSqlite(const Flags& flags, Report& report);

// --- handoff, shared by both stores -----------------------------------------

struct HandoffOutcome {
  Samples samples;  // release start -> next acquireLock returned
  std::uint64_t handoffs = 0;
  std::uint64_t timeouts = 0;  // acquireLock calls that gave up
  double seconds = 0;
};

// managers.size() threads on the lock `id` (XDC): thread 0 takes it first,
// the others block in acquireLock; each holder keeps it flags.holdMs, marks
// the time just before releaseLock, releases, and waits until another
// thread has acquired before it queues again (so there is always one holder
// and managers.size() - 1 waiters). Managers may repeat (shared manager).
HandoffOutcome runHandoff(
    const std::vector<dlm::DistributedLockManager*>& managers,
    const std::string& id, const Flags& flags);

// The LockConfiguration of the handoff waiters (printed with the results).
dlm::LockConfiguration handoffConfiguration(const Flags& flags);

// Whether the store says it can deliver releases (subscribeReleases()
// returned true), probed with a listener that is unsubscribed at once.
bool storeDeliversReleases(dlm::LockStore& store);

// "wake-up" when p50 is far below what polling alone gives (a wait uniform in
// [0, sleepBetweenRetries] has p50 ~ sleep/2), else "polling".
std::string handoffMode(double p50Ms, int sleepMs);

// --- readers, shared by both stores -----------------------------------------

// flags.readersThreads threads spread over `managers` (which may repeat)
// loop acquireLock / hold flags.readersHoldUs / releaseLock on
// flags.readersKeys keys "readers.k<i>" (DC), flags.sharedPercent % of the
// acquisitions SHARED; then the same with every lock EXCLUSIVE, interleaved
// in flags.rounds rounds. Adds "readers" (acquisitions/s and the ratio to
// all-EXCLUSIVE) and "readers.base_exclusive" to the report.
void runReaders(const std::vector<dlm::DistributedLockManager*>& managers,
                const std::string& store, const std::string& config,
                const Flags& flags, Report& report);

// The LockConfiguration of the readers workload (printed with the results).
dlm::LockConfiguration readersConfiguration(const Flags& flags);

}  // namespace dlm_bench
