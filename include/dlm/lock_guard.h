// LockGuard: holds an acquired lock for a scope, optionally keeping it alive.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "dlm/error.h"
#include "dlm/export.h"
#include "dlm/lock.h"

namespace dlm {

class DistributedLockManager;
class AppTransaction;
namespace internal {
struct KeepAliveEntry;
}

// What a LockGuard does while it lives.
struct DLM_API KeepAliveOptions {
  // Renew the lease (extend by the lock's TTL) every third of the TTL.
  bool enabled = true;
  // Called once, on the manager's keep-alive thread, when a renewal finds the
  // lock taken over, or when the lease's last confirmed end minus a safety
  // margin (a tenth of the TTL, 20 ms to 2 s) passes without a confirmed
  // renewal: before the store could let anyone else take the lock, and
  // without waiting for a renewal that hangs (why.code() is LOCK_NOT_HELD).
  // Must return quickly and must not destroy the guard; typically it sets a
  // flag the guarded work checks.
  std::function<void(const DLMException& why)> onLost;
};

// Move-only RAII owner of an acquired Lock, of either mode (renewals,
// release and commit act on the lock's own hold: a SHARED lock's token,
// leaving other SHARED holders alone). The destructor releases the lock
// if still held, never throws, and reports a failed release as a
// RELEASE_FAILED event of the manager (which then goes on releasing it by
// token in the background until the store answers). A default-constructed or
// moved-from guard holds nothing. holdsLock(), lost() and expiresAt() never
// wait for I/O.
class DLM_API LockGuard {
 public:
  LockGuard() noexcept;
  // Takes `lock`, which `manager` must have acquired (else INVALID_ARGUMENT
  // or LOCK_NOT_HELD). `manager` must outlive the guard. With keep-alive
  // enabled the lease is renewed until the guard releases it.
  LockGuard(DistributedLockManager& manager, Lock lock,
            KeepAliveOptions keepAlive = KeepAliveOptions{});
  LockGuard(LockGuard&& other) noexcept;
  // Releases what this guard held first (as the destructor does).
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  ~LockGuard();

  // True while the guard holds a lock that was not released and not found
  // lost by the keep-alive.
  bool holdsLock() const;
  // True once the keep-alive found the lock lost.
  bool lost() const;
  // The guarded lock (its fencing token, key, ...). INTERNAL_ERROR on an
  // empty guard.
  const Lock& lock() const;
  // When the lease ends, following keep-alive renewals.
  StoreTime expiresAt() const;

  // Releases now; the result of DistributedLockManager::releaseLock (false
  // when the lock was lost). Throws as releaseLock does; the guard is empty
  // afterwards unless it threw.
  bool release();
  // Hands the release to the application's transaction
  // (DistributedLockManager::commitLock). If that transaction rolls back, the
  // guard's destructor (or release()) frees the lock in its own transaction.
  void commitLock(AppTransaction& tx);
  void commitLock(AppTransaction&& tx) { commitLock(tx); }
  // Makes the application's transaction depend on holding the lock
  // (DistributedLockManager::guardWithin); the guard keeps the lock and keeps
  // renewing it. LOCK_NOT_HELD on an empty guard or a lost lock.
  void guardWithin(AppTransaction& tx);
  void guardWithin(AppTransaction&& tx) { guardWithin(tx); }

 private:
  void stopKeepAlive() noexcept;
  void releaseQuietly() noexcept;

  DistributedLockManager* manager_ = nullptr;
  Lock lock_;
  std::shared_ptr<internal::KeepAliveEntry> keepAlive_;
};

}  // namespace dlm
