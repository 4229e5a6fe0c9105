// Timing defaults of the lock manager.
#pragma once

#include <chrono>

#include "dlm/export.h"

namespace dlm {

struct DLM_API LockConfiguration {
  // How long an acquired lock lives unless released or extended. > 0.
  std::chrono::milliseconds lockTtl{std::chrono::seconds(90)};
  // How long acquireLock waits by default. >= 0 (0: exactly one attempt).
  std::chrono::milliseconds waitForLock{std::chrono::seconds(90)};
  // The longest sleep between two attempts of a waiting acquireLock. > 0.
  // A release of the awaited lock ends the sleep at once where the store
  // can announce releases; an expiry never does.
  std::chrono::milliseconds sleepBetweenRetries{std::chrono::seconds(1)};
  // So that waiters do not attempt in lock-step: each sleep between attempts
  // is shortened by a random fraction of up to this, and of the waiters of
  // one manager woken by the same release, all but the longest-waiting one
  // start their attempt up to 2 ms later. 0 (exact schedule) to 0.5.
  double retryJitter = 0.1;
  // How many times one store call is retried after a transient failure
  // (connection lost, serialization failure, busy) before the manager gives
  // up with CONNECTION_ERROR or RETRIES_EXHAUSTED; retries also stop at the
  // call's deadline (operationTimeout). 0 to kMaxStoreRetries.
  int storeRetries = 3;
  // Pause before the first store retry; doubles with each further retry, up
  // to kMaxRetryPause (or storeRetryBackoff itself if larger), and never past
  // the call's deadline. > 0 and at most kMaxRetryBackoff.
  std::chrono::milliseconds storeRetryBackoff{std::chrono::milliseconds(50)};
  // The time budget of every call that touches the store: connecting,
  // waiting for a pooled connection, retries and their pauses included.
  // acquireLock finishes within its timeout + operationTimeout, every other
  // call (tryAcquireLock, releaseLock, extendLock, describeLock, initialize)
  // within operationTimeout, plus the small overrun documented in docs/guide.md
  // (scheduling, closing a connection that did not answer). A store that
  // does not answer in time gives CONNECTION_ERROR. 1 ms to 1 hour.
  std::chrono::milliseconds operationTimeout{std::chrono::seconds(5)};
  // How often a waiting acquireLock reports that it still waits (a WAITING
  // event, dlm/lock_events.h), after the report when it starts. > 0.
  std::chrono::milliseconds waitingReportInterval{std::chrono::seconds(10)};

  // Set-based when busy (docs/design.md): concurrent acquire, release and
  // extend calls of this manager's threads go to the store together, as one
  // batch call per kind, while up to maxBatchesInFlight batches of that kind
  // are already at the store; a lone call goes at once, alone. Each lock
  // keeps its own outcome, error and deadline. false: every call alone.
  bool batchStoreCalls = true;
  // The most calls one batch carries. 1 to kMaxBatchSize.
  int maxBatchSize = 64;
  // How many batches of one kind may be at the store at once (each on a
  // connection of its own). 1 to kMaxBatchesInFlight. More batches in
  // flight make each smaller: more calls, more server work per lock.
  int maxBatchesInFlight = 1;

  static constexpr int kMaxBatchSize = 1000;
  static constexpr int kMaxBatchesInFlight = 64;
  static constexpr int kMaxStoreRetries = 1000;
  static constexpr std::chrono::milliseconds kMaxRetryBackoff{
      std::chrono::minutes(1)};
  static constexpr std::chrono::milliseconds kMaxRetryPause{
      std::chrono::seconds(2)};
  static constexpr std::chrono::milliseconds kMaxOperationTimeout{
      std::chrono::hours(1)};

  // Throws DLMException(INVALID_ARGUMENT) naming the first bad field.
  void validate() const;
};

// How long before a guarded lock's lease ends (its last confirmed renewal
// plus `ttl`) the keep-alive declares it lost: a tenth of the TTL, at least
// 20 ms and at most 2 s. Whatever must stop when the lock is lost (dlmctl
// exec's command) has this long to do so before another holder may get in.
DLM_API std::chrono::milliseconds keepAliveLossMargin(std::chrono::milliseconds ttl);

}  // namespace dlm
