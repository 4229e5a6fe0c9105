// Wakes a manager's waiting acquireLock calls when a lock that blocks them is
// released (the store delivers released keys through ReleaseListener).
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <string_view>

#include "dlm/clock.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

// True when freeing `released` may unblock a waiter for `waiting`: it is the
// same key, an ancestor or a descendant of it.
bool mayUnblock(const StoreKey& waiting, std::string_view released);

class ReleaseWaitHub final : public ReleaseListener {
 public:
  struct Waiter {
    explicit Waiter(const StoreKey& k) : key(k) {}
    const StoreKey& key;
    WakeSignal signal;
    // Set before each wake: 0 for the longest-waiting matching waiter of
    // this hub, 1, 2, ... for the others.
    int rank = 0;
    // Set when the store may have lost announcements (and, with them, the
    // request rows committed just before a server crash): the waiter records
    // its request again. Cleared by the waiter.
    std::atomic<bool> missed{false};
  };

  // Registers `waiter` (in arrival order) for the lifetime of the object.
  class Registration {
   public:
    Registration(ReleaseWaitHub& hub, Waiter& waiter);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    ReleaseWaitHub& hub_;
    std::list<Waiter*>::iterator it_;
  };

  // The rank the last wake of `waiter` gave it.
  int rankOf(const Waiter& waiter);

  void released(std::string_view key) override;
  void missedReleases() override;
  // Also runs `fn` (may be empty) from missedReleases, under the hub's
  // mutex: once this returns, a previous `fn` is not running any more.
  void onMissedReleases(std::function<void()> fn);
  // Wakes every waiter now (the manager is being destroyed); they find out
  // why from the manager's state.
  void wakeAll();

 private:
  std::mutex mutex_;
  std::list<Waiter*> waiters_;
  std::function<void()> onMissed_;
};

}  // namespace dlm::internal
