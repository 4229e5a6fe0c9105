// Runs the manager's store calls: retries transient failures under the
// call's deadline, and counts and reports store errors and reconnections.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "dlm/clock.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/lock.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class Telemetry;

class StoreRetry {
 public:
  // All four must outlive this object.
  StoreRetry(LockStore& store, Clock& clock, const LockConfiguration& config,
             Telemetry& telemetry);
  StoreRetry(const StoreRetry&) = delete;
  StoreRetry& operator=(const StoreRetry&) = delete;

  // Runs fn (a store call) under `deadline`, retrying transient failures
  // with doubling backoff until storeRetries or the deadline; then throws
  // CONNECTION_ERROR or RETRIES_EXHAUSTED. Other errors are rethrown at once.
  // `lock` (may be null) names the lock in messages.
  //
  // Safe for every store call: acquire is idempotent on its token and
  // release/extend are conditional on it, so a call whose reply was lost
  // can be repeated. No pause crosses the deadline; the doubling stops at
  // kMaxRetryPause (or the configured backoff, if larger), so no setting
  // that validation accepts can overflow or sleep for hours.
  template <typename Fn>
  auto run(const Lock* lock, Deadline deadline, Fn&& fn);

  // Counts `e` by its code and reports it as a STORE_ERROR event.
  void reportStoreError(const DLMException& e);
  // A STORE_RECONNECTED event when the store's reconnections() grew.
  void checkReconnections() noexcept;

 private:
  // Called from the handler of a failed try `retry`: rethrows it, or
  // throws the final error when no retry is left, else sleeps before the
  // next try and doubles `backoff`.
  void pauseOrGiveUp(const DLMException& e, const Lock* lock, Deadline deadline,
                     int retry, std::chrono::milliseconds& backoff);

  LockStore& store_;
  Clock& clock_;
  const LockConfiguration& config_;
  Telemetry& telemetry_;
  std::atomic<std::uint64_t> seenReconnections_;
};

template <typename Fn>
auto StoreRetry::run(const Lock* lock, Deadline deadline, Fn&& fn) {
  // Reconnections the store made during the call are reported once it
  // returns, whatever the outcome.
  struct CheckReconnections {
    StoreRetry& retry;
    ~CheckReconnections() { retry.checkReconnections(); }
  } check{*this};
  std::chrono::milliseconds backoff = config_.storeRetryBackoff;
  for (int retry = 0;; ++retry) {
    try {
      const DeadlineScope scope(deadline);
      return fn();
    } catch (const DLMException& e) {
      pauseOrGiveUp(e, lock, deadline, retry, backoff);
    }
  }
}

}  // namespace dlm::internal
