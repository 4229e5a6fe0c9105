// One contender: a loop that takes locks through a DistributedLockManager,
// holds each for a moment and records every hold. `dlmctl demo` runs one per
// worker process; the contention tests run many per process and per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "hold_log.h"
#include "dlm/lock.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_mode.h"

namespace dlm::oracle {

struct WeightedKey {
  std::string id;  // lock id, e.g. "demo.key-1"
  int weight = 1;  // relative chance of being picked
};

struct ContendOptions {
  std::vector<WeightedKey> keys;
  LockLevel level = LockLevel::DC;
  int worker = 0;  // recorded on every Hold
  // Stop after this many attempts (0: no limit) or at the deadline, whichever
  // comes first. At least one of the two must be set.
  std::int64_t maxAttempts = 0;
  std::chrono::steady_clock::time_point deadline =
      std::chrono::steady_clock::time_point::max();
  // Asked before every attempt when set: true ends the loop (a run that
  // lasts until its parent has seen enough, not for a fixed time).
  std::function<bool()> stopRequested;
  // Called once, right after the loop's `targetHolds`-th hold was released
  // (0: never). The loop goes on: with stopRequested, a parent can run every
  // contender until all of them reached their targets.
  std::int64_t targetHolds = 0;
  std::function<void()> onTarget;
  // Transient store errors (CONNECTION_ERROR, RETRIES_EXHAUSTED: a server
  // that was slow or restarting) the loop rides out: a failed attempt is
  // counted and the loop goes on; a failed release is repeated, the lock
  // being still held, as the API says. More than this many end the loop
  // like any other error (0: the first one does).
  int transientErrorsAllowed = 0;
  // How long each hold lasts: uniform in [holdMin, holdMax].
  std::chrono::microseconds holdMin{0};
  std::chrono::microseconds holdMax{0};
  // Pause after each attempt (held or not), uniform in [0, pauseMax]; leaves
  // gaps in which parent keys can be taken.
  std::chrono::microseconds pauseMax{0};
  // TTL of every acquisition: keep it well above holdMax, or a lock may
  // expire while held and be taken legitimately by another worker.
  std::chrono::milliseconds ttl{std::chrono::seconds(30)};
  // acquireLock's timeout.
  std::chrono::milliseconds timeout{std::chrono::milliseconds(200)};
  // Percentage of attempts made with tryAcquireLock instead of acquireLock.
  int tryPercent = 0;
  // Percentage of attempts made in LockMode::SHARED (the rest EXCLUSIVE):
  // 0 for a writer, 100 for a reader, anything between for a mix. Each Hold
  // records the mode it was taken in.
  int sharedPercent = 0;
  std::uint64_t seed = 0;
};

struct ContendResult {
  std::vector<Hold> holds;
  std::int64_t attempts = 0;
  std::int64_t acquisitions = 0;
  // LOCK_UNAVAILABLE: tryAcquireLock found the key busy or acquireLock timed
  // out. Expected under contention.
  std::int64_t unavailable = 0;
  // releaseLock returned false (should never happen with a long TTL).
  std::int64_t failedReleases = 0;
  // Transient store errors ridden out (ContendOptions::transientErrorsAllowed).
  std::int64_t transientErrors = 0;
  // Any other DLMException or exception ends the loop; this is its text
  // ("CODE: message"), empty if none.
  std::string error;

  bool ok() const { return error.empty() && failedReleases == 0; }
};

// A result as text, for a worker process to hand to its parent: "S" line
// with the counters, an "E" line with the error if any, an "H" line per hold.
void writeResult(const ContendResult& result, std::ostream& out);
// The inverse; nullopt (with `problem` set) for damaged text, e.g. from a
// worker that died while writing.
std::optional<ContendResult> readResult(std::istream& in, std::string* problem);

// Runs the loop on the calling thread. `manager` must be initialized and
// outlive the call; it may be shared with other threads. Never throws a
// DLMException (recorded in ContendResult::error instead).
ContendResult contend(DistributedLockManager& manager,
                      const ContendOptions& options);

}  // namespace dlm::oracle
