// DistributedLockManager::waitForLock: an acquireLock's wait after its first
// attempt was refused (request row, deadlock check, sleeps and wake-ups).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dlm/lock_manager.h"
#include "manager/in_doubt_resolver.h"
#include "manager/lock_manager_internal.h"
#include "keys/owner_id.h"
#include "common/random_id.h"
#include "telemetry/telemetry.h"
#include "manager/wait_hub.h"

namespace dlm {

using internal::blockedMessage;
using internal::kMaxTtl;
using internal::lockName;
using std::chrono::milliseconds;

namespace {

// Deletes the waiter's request row however the wait ends, within what is
// left of the call's time. A failure here is harmless: the row expires at
// the waiter's deadline and is then ignored.
class RequestRow {
 public:
  RequestRow(LockStore& store, internal::InDoubtResolver& resolver,
             const std::string& key, std::string owner, Deadline callEnd,
             milliseconds operationTimeout)
      : store_(store),
        resolver_(resolver),
        key_(key),
        owner_(std::move(owner)),
        callEnd_(callEnd),
        operationTimeout_(operationTimeout) {}
  ~RequestRow() {
    const Deadline deadline =
        std::min(callEnd_, deadlineAfter(operationTimeout_));
    try {
      if (timeLeft(deadline) > milliseconds::zero()) {
        const DeadlineScope scope(deadline);
        store_.unregisterWait(key_, owner_);
        return;
      }
    } catch (const DLMException&) {
    }
    // The row lives until the waiter's deadline + 1 s (maxWait).
    try {
      resolver_.addStaleRequest(
          key_, owner_,
          std::max(timeLeft(callEnd_), milliseconds::zero()) +
              milliseconds(1000));
    } catch (...) {
      // Out of memory at worst: the row expires by itself.
    }
  }
  RequestRow(const RequestRow&) = delete;
  RequestRow& operator=(const RequestRow&) = delete;

 private:
  LockStore& store_;
  internal::InDoubtResolver& resolver_;
  const std::string& key_;
  std::string owner_;
  Deadline callEnd_;
  milliseconds operationTimeout_;
};

std::string describeCycle(const std::vector<std::string>& cycle) {
  std::string out;
  for (const auto& key : cycle) {
    out += fmt::format("'{}' (whose holder waits for) ", key);
  }
  return out + "a lock this thread's owner holds";
}

// The longest jitter added to the attempt of a waiter woken together with
// others.
constexpr milliseconds kWakeJitter{2};

}  // namespace

void DistributedLockManager::waitForLock(Lock& lock, milliseconds ttl,
                                         Clock::TimePoint deadline,
                                         Deadline callEnd, milliseconds timeout,
                                         Refusal& refusal) {
  auto timedOut = [&] {
    return DLMException(
        ErrorCode::LOCK_UNAVAILABLE,
        fmt::format("{} (gave up after {} ms)",
                    blockedMessage(lock, refusal.blockedBy, refusal.queued),
                    timeout.count()));
  };
  const auto stopped = [&] {
    return DLMException(
        ErrorCode::LOCK_UNAVAILABLE,
        fmt::format("{} (waiting was stopped)",
                    blockedMessage(lock, refusal.blockedBy, refusal.queued)));
  };
  // Counted as a wait from the first refusal on, whatever the outcome.
  telemetry_->waitStarted();
  const auto waitStart = std::chrono::steady_clock::now();
  struct WaitTimer {
    internal::Telemetry& telemetry;
    std::chrono::steady_clock::time_point start;
    ~WaitTimer() {
      telemetry.waitEnded(std::chrono::steady_clock::now() - start);
    }
  } waitTimer{*telemetry_, waitStart};
  if (clock_->now() >= deadline) {
    telemetry_->timedOut();
    throw timedOut();
  }
  if (waitsStopped_.load()) throw stopped();
  // Reports follow the manager's clock, as the waiting does.
  const Clock::TimePoint reportStart = clock_->now();
  reportWaiting(lock, refusal, reportStart);
  auto nextReport = reportStart + config_.waitingReportInterval;

  // Listen for releases before the next attempt, so a release between that
  // attempt and the sleep still ends the sleep.
  watchReleases();
  internal::WaitHub::Waiter waiter(lock.key_);
  internal::WaitHub::Registration registration(*hub_, waiter);

  const std::string owner = internal::currentThreadOwner();
  const auto left = [&] {
    return std::chrono::ceil<milliseconds>(deadline - clock_->now());
  };
  // The request row stops counting at the waiter's deadline (+1 s).
  const auto maxWait = [&] {
    return std::clamp(left() + milliseconds(1000), milliseconds(1), kMaxTtl);
  };
  // Each store call gets operationTimeout, and none runs past the call's end.
  const auto stepDeadline = [&] { return std::min(callEnd, callDeadline()); };
  const auto checkAlive = [&] {
    if (state_.load() == kDestroyed) {
      throw DLMException(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("{}: the lock manager was destroyed while waiting",
                      lockName(lock)));
    }
  };
  // Records the request row, following the wait-for graph first. A cycle
  // closed only by a leftover of this owner (an acquisition in doubt, or a
  // release a server crash undid) is no deadlock: the leftover is released
  // by token and the key attempted again.
  const auto registerRequest = [&] {
    for (int round = 0;; ++round) {
      const WaitRegistration registered =
          withStoreRetries(&lock, stepDeadline(), [&] {
            return store_->registerWait(
                WaitRequest{lock.key_, owner, maxWait(), lock.mode_});
          });
      if (registered.deadlockCycle.empty()) return false;
      // The cycle closes at a lock of this owner's that blocks its last key,
      // or at one of its request rows that holds the last key's waiter
      // back: a leftover of an earlier wait is no deadlock.
      if (round < 2) {
        if (releaseOwnLeftovers(owner, registered.deadlockCycle.back(),
                                stepDeadline(), /*related=*/true)) {
          if (attempt(lock, ttl, &refusal, stepDeadline())) return true;
          continue;
        }
        bool removed = false;
        try {
          const DeadlineScope scope(stepDeadline());
          removed = resolver_->removeStaleRequests(owner);
        } catch (const DLMException&) {
          // Kept for the next wait; this one reports the cycle.
        }
        if (removed) continue;
      }
      telemetry_->deadlock();
      if (telemetry_->reporting()) {
        LockEvent event = internal::lockEvent(LockEventKind::DEADLOCK, lock);
        event.cycle = registered.deadlockCycle;
        telemetry_->emit(event);
      }
      throw DLMException(
          ErrorCode::DEADLOCK_DETECTED,
          fmt::format("{}: waiting would deadlock: {}", lockName(lock),
                      describeCycle(registered.deadlockCycle)));
    }
  };
  if (registerRequest()) return;
  RequestRow requestRow(*store_, *resolver_, lock.key_.key, owner, callEnd,
                        config_.operationTimeout);

  for (;;) {
    checkAlive();
    waiter.signal.reset();
    // Announcements may have been missed (the store's listening connection
    // was lost), and with them this request row if a server crash undid it.
    if (waiter.missed.exchange(false) && registerRequest()) return;
    if (attempt(lock, ttl, &refusal, stepDeadline())) return;
    if (clock_->now() >= deadline) {
      telemetry_->timedOut();
      throw timedOut();
    }
    if (clock_->now() >= nextReport) {
      reportWaiting(lock, refusal, reportStart);
      nextReport = clock_->now() + config_.waitingReportInterval;
    }
    // Checked after the signal's reset: a stopWaiting() after this check
    // leaves the signal set, so the sleep below ends at once.
    if (waitsStopped_.load()) throw stopped();
    // Never sleep past the deadline; the loop makes a last attempt there.
    milliseconds sleep = config_.sleepBetweenRetries;
    if (config_.retryJitter > 0) {
      sleep -= std::chrono::duration_cast<milliseconds>(
          sleep * (config_.retryJitter * internal::randomFraction()));
    }
    if (telemetry_->reporting()) {
      // Wake for the next report too.
      sleep = std::min(
          sleep, std::max(milliseconds(1), std::chrono::ceil<milliseconds>(
                                               nextReport - clock_->now())));
    }
    checkAlive();
    const bool woken =
        clock_->sleepUntilSignalled(std::min(sleep, left()), waiter.signal);
    if (woken && config_.retryJitter > 0 && hub_->rankOf(waiter) > 0) {
      // Others were woken by the same release; the longest waiter goes first.
      clock_->sleepFor(std::min(std::chrono::duration_cast<milliseconds>(
                                    kWakeJitter * internal::randomFraction()) +
                                    milliseconds(1),
                                std::max(milliseconds(0), left())));
    }
  }
}

}  // namespace dlm
