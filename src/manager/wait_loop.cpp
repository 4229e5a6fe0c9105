#include "manager/wait_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/random_id.h"
#include "dlm/lock_store_admin.h"
#include "keys/owner_id.h"
#include "manager/in_doubt_resolver.h"
#include "manager/messages.h"
#include "manager/request_row.h"
#include "telemetry/telemetry.h"

namespace dlm {

using internal::blockedMessage;
using internal::lockName;
using std::chrono::milliseconds;

namespace {

// The longest jitter added to the attempt of a waiter woken together with
// others.
constexpr milliseconds kWakeJitter{2};

// How soon a request renewal that found the store unreachable is tried
// again.
constexpr milliseconds kRenewalRetry{1000};

// Counts a wait from the first refusal on, and its time whatever the
// outcome.
class WaitTimer {
 public:
  explicit WaitTimer(internal::Telemetry& telemetry) : telemetry_(telemetry) {
    telemetry_.waitStarted();
  }
  ~WaitTimer() {
    telemetry_.waitEnded(std::chrono::steady_clock::now() - start_);
  }
  WaitTimer(const WaitTimer&) = delete;
  WaitTimer& operator=(const WaitTimer&) = delete;

 private:
  internal::Telemetry& telemetry_;
  const std::chrono::steady_clock::time_point start_ =
      std::chrono::steady_clock::now();
};

}  // namespace

DistributedLockManager::Impl::WaitLoop::WaitLoop(
    Impl& manager, Lock& lock, milliseconds ttl, Clock::TimePoint deadline,
    Deadline callEnd, milliseconds timeout, Refusal& refusal)
    : manager_(manager),
      lock_(lock),
      ttl_(ttl),
      deadline_(deadline),
      callEnd_(callEnd),
      timeout_(timeout),
      refusal_(refusal),
      owner_(internal::currentThreadOwner()) {}

void DistributedLockManager::Impl::WaitLoop::run() {
  const WaitTimer timer(manager_.telemetry());
  throwIfTimedOut();
  throwIfStopped();
  reportStart_ = manager_.clock().now();
  reportWaiting();
  nextReport_ = reportStart_ + manager_.config().waitingReportInterval;

  // Listen for releases before the next attempt, so a release between that
  // attempt and the sleep still ends the sleep. Subscribing may connect (a
  // LISTEN connection): within this call's bound.
  {
    const DeadlineScope scope(stepDeadline());
    manager_.watchReleases();
  }
  Waiter waiter(lock_.key_);
  const internal::ReleaseWaitHub::Registration registration(manager_.hub(),
                                                            waiter);
  // Acquired on the way: no request row was recorded (a cycle was found).
  if (registerRequest()) return;
  internal::RequestRow requestRow(manager_.store(), manager_.resolver(),
                                  lock_.key_.key, owner_, callEnd_,
                                  manager_.config().operationTimeout);
  requestRowExists_ = true;
  for (;;) {
    if (attemptAgain(waiter)) {
      requestRow.endedByGrant();
      return;
    }
    // A sleep that ran its course: no flood now, so the next wake-up is
    // tried at once again.
    fruitlessWakes_ = woken_ ? fruitlessWakes_ + 1 : 0;
    throwIfTimedOut();
    reportIfDue();
    // Checked after the signal's reset: a stopWaiting() after this check
    // leaves the signal set, so the sleep that follows ends at once.
    throwIfStopped();
    if (sleepUntilWakeOrRetry(waiter)) {
      requestRow.endedByGrant();
      return;
    }
  }
}

// --- the request row and the wait-for graph ----------------------------------

// A cycle closed only by a leftover of this owner (an acquisition in doubt,
// or a release a server crash undid) is no deadlock: the leftover is
// released by token and the key attempted again.
bool DistributedLockManager::Impl::WaitLoop::registerRequest() {
  for (int round = 0;; ++round) {
    const std::uint64_t deletedBefore = manager_.resolver().requestsDeleted();
    const std::vector<std::string> cycle = recordRequest();
    if (cycle.empty()) return false;
    if (round < 2 && releasedOwnLeftover(cycle)) {
      if (manager_.attempt(lock_, ttl_, &refusal_, stepDeadline())) {
        return true;
      }
      continue;
    }
    if (round < 2 && removedStaleRequests(deletedBefore)) continue;
    throwDeadlock(cycle);
  }
}

std::vector<std::string>
DistributedLockManager::Impl::WaitLoop::recordRequest() {
  // The request row stops counting at the end of its lease, or at the
  // waiter's deadline (+1 s) if that comes first.
  const milliseconds maxWait =
      std::clamp(left() + milliseconds(1000), milliseconds(1), kRequestLease);
  // The waiter's own deadline, for the listings (dlmctl waiters): none for
  // a wait without end (acquireLock with a timeout beyond the clock).
  std::optional<milliseconds> untilDeadline;
  if (deadline_ != Clock::TimePoint::max()) {
    untilDeadline = std::max(left(), milliseconds(0));
  }
  // The registration replaces this owner's row for the key: a background
  // deletion of the earlier row must not reach the new one.
  manager_.resolver().settleRequest(lock_.key_.key, owner_, stepDeadline());
  WaitRegistration registered;
  try {
    registered = manager_.withStoreRetries(&lock_, stepDeadline(), [&] {
      return manager_.store().registerWait(WaitRequest{
          lock_.key_, owner_, maxWait, lock_.mode_, untilDeadline});
    });
  } catch (const DLMException&) {
    // The row may have been written before the call failed (a PostgreSQL
    // registration is two transactions). Once the RequestRow exists it
    // deletes the row when the wait ends (a failed renewal does not end
    // it); before, the row is left to the resolver, so that a later wait
    // of this owner that meets it does not report a deadlock with itself.
    if (!requestRowExists_) {
      manager_.resolver().addStaleRequest(lock_.key_.key, owner_, maxWait);
    }
    throw;
  }
  renewAt_ = manager_.clock().now() + kRequestLease / 2;
  return registered.deadlockCycle;
}

bool DistributedLockManager::Impl::WaitLoop::renewRequest() {
  try {
    return registerRequest();
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::CONNECTION_ERROR &&
        e.code() != ErrorCode::RETRIES_EXHAUSTED) {
      throw;
    }
    // The store cannot be reached now (a failover, a restart): the wait goes
    // on. Its request may lapse meanwhile (a lost queue place, never a lost
    // lock); it is registered again a second from now.
    renewAt_ = manager_.clock().now() + kRenewalRetry;
    return false;
  }
}

// The cycle closes at a lock of this owner's that blocks its last key, or
// at one of its request rows that holds the last key's waiter back: a
// leftover of an earlier wait is no deadlock.
bool DistributedLockManager::Impl::WaitLoop::releasedOwnLeftover(
    const std::vector<std::string>& cycle) {
  return manager_.releaseOwnLeftovers(owner_, cycle.back(), stepDeadline(),
                                      /*related=*/true);
}

bool DistributedLockManager::Impl::WaitLoop::removedStaleRequests(
    std::uint64_t deletedBefore) {
  try {
    const DeadlineScope scope(stepDeadline());
    return manager_.resolver().removeStaleRequests(owner_, deletedBefore);
  } catch (const DLMException&) {
    // Kept for the next wait; this one reports the cycle.
    return false;
  }
}

void DistributedLockManager::Impl::WaitLoop::throwDeadlock(
    const std::vector<std::string>& cycle) {
  internal::Telemetry& telemetry = manager_.telemetry();
  telemetry.deadlock();
  if (telemetry.reporting()) {
    LockEvent event = internal::lockEvent(LockEventKind::DEADLOCK, lock_);
    event.cycle = cycle;
    telemetry.emit(event);
  }
  throw DLMException(
      ErrorCode::DEADLOCK_DETECTED,
      fmt::format("{}: waiting would deadlock: {}", lockName(lock_),
                  internal::describeCycle(cycle)));
}

// --- attempts and giving up --------------------------------------------------

bool DistributedLockManager::Impl::WaitLoop::attemptAgain(Waiter& waiter) {
  throwIfDestroyed();
  waiter.signal.reset();
  // Announcements may have been missed (the store's listening connection
  // was lost), and with them this request row if a server crash undid it.
  if (waiter.missed.exchange(false) && registerRequest()) return true;
  return manager_.attempt(lock_, ttl_, &refusal_, stepDeadline());
}

void DistributedLockManager::Impl::WaitLoop::throwIfTimedOut() {
  if (manager_.clock().now() < deadline_) return;
  manager_.telemetry().timedOut();
  throw DLMException(
      ErrorCode::LOCK_UNAVAILABLE,
      fmt::format("{} (gave up after {} ms)",
                  blockedMessage(lock_, refusal_.blockedBy, refusal_.queued),
                  timeout_.count()));
}

void DistributedLockManager::Impl::WaitLoop::throwIfStopped() {
  if (!manager_.waitsStopped()) return;
  throw DLMException(
      ErrorCode::LOCK_UNAVAILABLE,
      fmt::format("{} (waiting was stopped)",
                  blockedMessage(lock_, refusal_.blockedBy, refusal_.queued)));
}

void DistributedLockManager::Impl::WaitLoop::throwIfDestroyed() {
  if (!manager_.destroyed()) return;
  throw DLMException(
      ErrorCode::INTERNAL_ERROR,
      fmt::format("{}: the lock manager was destroyed while waiting",
                  lockName(lock_)));
}

// --- reports -----------------------------------------------------------------

void DistributedLockManager::Impl::WaitLoop::reportIfDue() {
  if (manager_.clock().now() < nextReport_) return;
  reportWaiting();
  nextReport_ =
      manager_.clock().now() + manager_.config().waitingReportInterval;
}

void DistributedLockManager::Impl::WaitLoop::reportWaiting() {
  internal::Telemetry& telemetry = manager_.telemetry();
  if (!telemetry.reporting()) return;
  LockEvent event = internal::lockEvent(LockEventKind::WAITING, lock_);
  event.waited = std::chrono::duration_cast<milliseconds>(
      manager_.clock().now() - reportStart_);
  event.attempts = refusal_.attempts;
  if (!refusal_.blockedBy.empty()) event.blocker = blocker();
  telemetry.emit(event);
}

LockBlocker DistributedLockManager::Impl::WaitLoop::blocker() const {
  LockBlocker blocker;
  blocker.key = refusal_.blockedBy;
  blocker.queued = refusal_.queued;
  LockStoreAdmin* admin = manager_.store().admin();
  if (refusal_.queued || admin == nullptr) return blocker;
  // Who holds it: one more store call, made only for the report.
  try {
    const DeadlineScope scope(manager_.callDeadline());
    // The EXCLUSIVE holder, or the oldest SHARED one.
    const auto holders = admin->holdersOf(refusal_.blockedBy);
    if (!holders.empty()) {
      const LockRecord& held = holders.front();
      blocker.owner = held.owner;
      blocker.host = held.holder.host;
      blocker.pid = held.holder.pid;
      blocker.mode = held.mode;
      blocker.since = held.acquiredAt;
    }
  } catch (const DLMException&) {
    // The report goes out with the key alone.
  }
  return blocker;
}

// --- sleeping ----------------------------------------------------------------

bool DistributedLockManager::Impl::WaitLoop::sleepUntilWakeOrRetry(
    Waiter& waiter) {
  const milliseconds sleep = nextSleep();
  throwIfDestroyed();
  // Never past the deadline: the loop makes a last attempt there.
  const Clock::TimePoint wakeAt =
      manager_.clock().now() + std::min(sleep, left());
  const auto until = [&](Clock::TimePoint at) {
    return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                         at - manager_.clock().now()));
  };
  bool woken = false;
  for (;;) {
    // The request's lease is renewed in the middle of a sleep that spans
    // its renewal time; attempts keep their own pace.
    if (manager_.clock().now() >= renewAt_) {
      if (renewRequest()) return true;
      continue;
    }
    const milliseconds toWake = until(wakeAt);
    const milliseconds toRenewal = until(renewAt_);
    woken = manager_.clock().sleepUntilSignalled(std::min(toWake, toRenewal),
                                                 waiter.signal);
    if (woken || toWake <= toRenewal) break;
  }
  woken_ = woken;
  if (woken && fruitlessWakes_ > 0) {
    // Wake-ups that come during the gap are folded into this one (the
    // attempt resets the signal).
    manager_.clock().sleepFor(
        std::min(wakeGap(), std::max(milliseconds(0), left())));
  }
  if (woken && manager_.config().retryJitter > 0 &&
      manager_.hub().rankOf(waiter) > 0) {
    // Others were woken by the same release; the longest waiter goes first.
    manager_.clock().sleepFor(std::min(
        std::chrono::duration_cast<milliseconds>(kWakeJitter *
                                                 internal::randomFraction()) +
            milliseconds(1),
        std::max(milliseconds(0), left())));
  }
  return false;
}

// 1 ms after the first fruitless wake-up, doubling, up to a quarter of
// sleepBetweenRetries (at most 100 ms): a waiter behind others in the queue
// reacts to its turn at most that late, and a flood of wake-ups gives at
// most one attempt per gap.
milliseconds DistributedLockManager::Impl::WaitLoop::wakeGap() const {
  const milliseconds cap = std::clamp(manager_.config().sleepBetweenRetries / 4,
                                      milliseconds(1), milliseconds(100));
  const int doublings = std::min(fruitlessWakes_ - 1, 10);
  return std::min(cap, milliseconds(1) * (1 << std::max(doublings, 0)));
}

// sleepBetweenRetries shortened by the jitter, and by the next report.
milliseconds DistributedLockManager::Impl::WaitLoop::nextSleep() const {
  const LockConfiguration& config = manager_.config();
  milliseconds sleep = config.sleepBetweenRetries;
  if (config.retryJitter > 0) {
    sleep -= std::chrono::duration_cast<milliseconds>(
        sleep * (config.retryJitter * internal::randomFraction()));
  }
  if (manager_.telemetry().reporting()) {
    // Wake for the next report too.
    sleep = std::min(
        sleep,
        std::max(milliseconds(1), std::chrono::ceil<milliseconds>(
                                      nextReport_ - manager_.clock().now())));
  }
  return sleep;
}

milliseconds DistributedLockManager::Impl::WaitLoop::left() const {
  return std::chrono::ceil<milliseconds>(deadline_ - manager_.clock().now());
}

Deadline DistributedLockManager::Impl::WaitLoop::stepDeadline() const {
  return std::min(callEnd_, manager_.callDeadline());
}

}  // namespace dlm
