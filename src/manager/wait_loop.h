// The wait of an acquireLock whose first attempt was refused: records a
// request row (following the wait-for graph), sleeps until a release wakes
// it or the next retry is due, attempts again, and gives up at the
// deadline, on stopWaiting() or when the manager is destroyed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "dlm/clock.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "manager/manager_impl.h"
#include "manager/release_wait_hub.h"

namespace dlm {

class DistributedLockManager::Impl::WaitLoop {
 public:
  // `deadline`: the manager's clock's end of the wait; `callEnd`: the steady
  // instant by which the whole call returns (deadline + operationTimeout);
  // `timeout`: the caller's, for messages. `refusal` is the first attempt's
  // and follows every later one. All references must outlive the loop.
  WaitLoop(Impl& manager, Lock& lock, std::chrono::milliseconds ttl,
           Clock::TimePoint deadline, Deadline callEnd,
           std::chrono::milliseconds timeout, Refusal& refusal);

  // Returns once `lock` is held. Throws LOCK_UNAVAILABLE at the deadline or
  // after stopWaiting(), DEADLOCK_DETECTED, INTERNAL_ERROR when the manager
  // is destroyed meanwhile, and store errors at once.
  void run();

 private:
  using Waiter = internal::ReleaseWaitHub::Waiter;

  // Records the request row, following the wait-for graph first; true when
  // an attempt made on the way acquired the lock. Throws DEADLOCK_DETECTED
  // for a cycle that no leftover of this owner explains.
  bool registerRequest();
  // The store call: the keys of the cycle waiting would close, or none.
  // Sets when the request's lease is next renewed. First waits for a
  // background deletion of this owner's earlier row for the key that is in
  // progress (InDoubtResolver::settleRequest; CONNECTION_ERROR if it does
  // not return within the step's deadline).
  std::vector<std::string> recordRequest();
  // Registers the request again (its lease renewed, the wait-for graph
  // walked again); true when an attempt on the way acquired. A store that
  // cannot be reached fails nothing: the renewal is tried again later.
  bool renewRequest();
  // Releases this owner's leftover that closes `cycle`; true when one was.
  bool releasedOwnLeftover(const std::vector<std::string>& cycle);
  // Removes request rows this owner left behind; true when there were some,
  // or when the resolver deleted request rows in the background since its
  // count was `deletedBefore` (taken before the registration that met the
  // cycle).
  bool removedStaleRequests(std::uint64_t deletedBefore);
  [[noreturn]] void throwDeadlock(const std::vector<std::string>& cycle);

  // After a wake or a sleep: records the request again if announcements
  // were missed, then attempts; true when held.
  bool attemptAgain(Waiter& waiter);
  // The loop's last attempt is at the deadline: past it, gives up.
  void throwIfTimedOut();
  void throwIfStopped();
  void throwIfDestroyed();
  // A WAITING report every waitingReportInterval.
  void reportIfDue();
  void reportWaiting();
  // What blocks the lock as the last refusal said, with its holder when
  // the store can tell.
  LockBlocker blocker() const;
  // Sleeps until a release wakes `waiter` or the next attempt is due. After
  // wake-ups that won nothing, a woken waiter waits a growing quiet gap
  // first (wakeGap): a flood of wake-ups (a forged NOTIFY needs no dlm
  // role) costs a few attempts, not one per notification.
  // Renews the request on the way when its renewal time comes; true when
  // that acquired the lock.
  bool sleepUntilWakeOrRetry(Waiter& waiter);
  std::chrono::milliseconds wakeGap() const;
  std::chrono::milliseconds nextSleep() const;

  // What is left of the wait by the manager's clock.
  std::chrono::milliseconds left() const;
  // Each store call gets operationTimeout, and none runs past the call's end.
  Deadline stepDeadline() const;

  Impl& manager_;
  Lock& lock_;
  const std::chrono::milliseconds ttl_;
  const Clock::TimePoint deadline_;
  const Deadline callEnd_;
  const std::chrono::milliseconds timeout_;
  Refusal& refusal_;
  const std::string owner_;
  // Reports follow the manager's clock, as the waiting does.
  Clock::TimePoint reportStart_;
  Clock::TimePoint nextReport_;
  // Whether the last sleep ended by a wake-up, and how many wake-ups in a
  // row were followed by a refused attempt.
  bool woken_ = false;
  int fruitlessWakes_ = 0;
  // When the request row is registered again (kRequestLease / 2 after the
  // last registration).
  Clock::TimePoint renewAt_;
  // Whether run()'s RequestRow, which deletes the row when the wait ends,
  // exists yet.
  bool requestRowExists_ = false;
};

}  // namespace dlm
