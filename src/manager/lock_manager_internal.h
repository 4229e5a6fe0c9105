// What the lock manager's source files share: names for messages, limits,
// and the store-retry loop every call runs its store calls in.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "dlm/lock_manager.h"

namespace dlm::internal {

// The longest TTL (and request lifetime) the manager accepts.
constexpr std::chrono::milliseconds kMaxTtl = std::chrono::hours(24 * 365);

inline std::string levelName(LockLevel level) {
  return level == LockLevel::DC ? "DC" : "XDC";
}

// "lock 'client#id' (DC)", for messages.
inline std::string lockName(const Lock& lock) {
  return fmt::format("lock '{}' ({})", lock.lockId(),
                     levelName(lock.lockLevel()));
}

// Why an attempt on `lock` was refused, for LOCK_UNAVAILABLE messages.
inline std::string blockedMessage(const Lock& lock,
                                  const std::string& blockedBy, bool queued) {
  if (queued) {
    return fmt::format(
        "{} is not held by anyone in its way, but an earlier waiter for '{}' "
        "is queued and goes first (fair queueing)",
        lockName(lock), blockedBy);
  }
  if (blockedBy.empty() || blockedBy == lock.storeKey()) {
    return fmt::format("{} is held by someone else", lockName(lock));
  }
  return fmt::format("{} is blocked by the held lock '{}'", lockName(lock),
                     blockedBy);
}

// An event of `kind` about `lock`: its names, mode and fencing token.
inline LockEvent lockEvent(LockEventKind kind, const Lock& lock) {
  LockEvent event;
  event.kind = kind;
  event.lockId = lock.lockId();
  event.key = lock.storeKey();
  event.mode = lock.lockMode();
  event.fencingToken = lock.fencingToken();
  return event;
}

// Whether `e`, thrown by a store call, is the store failing (counted and
// reported as STORE_ERROR) rather than an answer about a lock.
inline bool isStoreFailure(const DLMException& e) {
  switch (e.code()) {
    case ErrorCode::CONNECTION_ERROR:
    case ErrorCode::RETRIES_EXHAUSTED:
    case ErrorCode::INTERNAL_ERROR:
    case ErrorCode::SCHEMA_MISMATCH:
    case ErrorCode::TABLE_CREATION_ERROR:
      return true;
    default:
      return e.transient();
  }
}

}  // namespace dlm::internal

namespace dlm {

// Retries transient store failures with doubling backoff. Safe for every
// store call: acquire is idempotent on its token and release/extend are
// conditional on it, so a call whose reply was lost can be repeated. Every
// try runs under `deadline` and no pause crosses it; the doubling stops at
// kMaxRetryPause (or the configured backoff, if larger), so no setting that
// validation accepts can overflow or sleep for hours.
template <typename Fn>
auto DistributedLockManager::withStoreRetries(const Lock* lock,
                                              Deadline deadline, Fn&& fn) {
  const std::chrono::milliseconds maxPause =
      std::max(config_.storeRetryBackoff, LockConfiguration::kMaxRetryPause);
  std::chrono::milliseconds backoff = config_.storeRetryBackoff;
  // Reconnections the store made during the call are reported once it
  // returns, whatever the outcome.
  struct CheckReconnections {
    DistributedLockManager& m;
    ~CheckReconnections() { m.checkReconnections(); }
  } check{*this};
  for (int retry = 0;; ++retry) {
    try {
      const DeadlineScope scope(deadline);
      return fn();
    } catch (const DLMException& e) {
      if (internal::isStoreFailure(e)) reportStoreError(e);
      if (!e.transient()) throw;
      const std::chrono::milliseconds left = timeLeft(deadline);
      if (retry >= config_.storeRetries ||
          left <= std::chrono::milliseconds::zero()) {
        const ErrorCode code = e.code() == ErrorCode::CONNECTION_ERROR
                                   ? ErrorCode::CONNECTION_ERROR
                                   : ErrorCode::RETRIES_EXHAUSTED;
        const std::string subject = lock != nullptr
                                        ? internal::lockName(*lock)
                                        : std::string("lock manager");
        const std::string why =
            left <= std::chrono::milliseconds::zero()
                ? fmt::format(
                      "no answer within the operation timeout of {} "
                      "ms ({} retries)",
                      config_.operationTimeout.count(), retry)
                : fmt::format("failed after {} retries", retry);
        throw DLMException(code,
                           fmt::format("{}: {} store call {}: {}", subject,
                                       store_->name(), why, e.what()));
      }
      clock_->sleepFor(std::min(backoff, left));
      backoff = std::min(backoff * 2, maxPause);
    }
  }
}

}  // namespace dlm
