// The clustered-locking API as a thin facade over DistributedLockManager:
// locks named by resource, held by the calling thread's owner (owner.h).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "dlm/export.h"
#include "dlm/lock_manager.h"

namespace dlm {

// Thread-safe. Each (owner, resource) pair holds at most one lock, of
// either mode; the service keeps the Lock handles (each with its own mode
// and token), so callers only pass resource names and releaseLock,
// commitLock and rollbackLock act on that owner's hold alone (other owners'
// SHARED holds of the resource stay).
// Resources are lock ids of the manager at `level` (hierarchical like any
// id). `manager` must be initialized and outlive the service. Locks still
// held when the service is destroyed are released.
class DLM_API ClusteredLockService {
 public:
  explicit ClusteredLockService(DistributedLockManager& manager,
                                LockLevel level = LockLevel::XDC);
  ~ClusteredLockService();
  ClusteredLockService(const ClusteredLockService&) = delete;
  ClusteredLockService& operator=(const ClusteredLockService&) = delete;

  // One attempt to lock `resource` for `ttl`, EXCLUSIVE. True when this
  // owner holds it afterwards (also when it already did: the lock is kept,
  // not extended); false when someone else holds it (or an earlier waiter is
  // queued for it). Throws INVALID_ARGUMENT, CONNECTION_ERROR,
  // RETRIES_EXHAUSTED.
  bool getLock(const std::string& resource, std::chrono::milliseconds ttl);
  // Waits up to `waitTime` (acquireLock); false on timeout. Throws
  // DEADLOCK_DETECTED when waiting would deadlock, and as above.
  bool getLock(const std::string& resource, std::chrono::milliseconds ttl,
               std::chrono::milliseconds waitTime);
  // As above in `mode`: SHARED holds `resource` beside other owners' SHARED
  // holds (lock_mode.h). Still one lock per (owner, resource): asking again
  // while holding it in the same mode, or SHARED while holding it EXCLUSIVE
  // (which covers it), keeps the lock held and returns true; asking
  // EXCLUSIVE while holding it SHARED throws INVALID_ARGUMENT (no upgrades:
  // release it first).
  bool getLock(const std::string& resource, std::chrono::milliseconds ttl,
               LockMode mode);
  bool getLock(const std::string& resource, std::chrono::milliseconds ttl,
               std::chrono::milliseconds waitTime, LockMode mode);
  // True when this owner held `resource` and the store freed it; false when
  // it held nothing (or the lock had been taken over after expiry).
  bool releaseLock(const std::string& resource);
  // DistributedLockManager::commitLock for this owner's lock on `resource`:
  // released only if `tx` commits. LOCK_NOT_HELD when this owner holds no
  // such lock or it was taken over (then `tx` cannot commit).
  void commitLock(const std::string& resource, AppTransaction& tx);
  void commitLock(const std::string& resource, AppTransaction&& tx) {
    commitLock(resource, tx);
  }
  // DistributedLockManager::guardWithin for this owner's lock on `resource`:
  // `tx` commits only if the lock is still held (it stays held).
  // LOCK_NOT_HELD when this owner holds no such lock or it is lost.
  void guardWithin(const std::string& resource, AppTransaction& tx);
  void guardWithin(const std::string& resource, AppTransaction&& tx) {
    guardWithin(resource, tx);
  }
  // Frees the lock in the library's own transaction (after `tx` rolled back,
  // or instead of commitLock). Result as releaseLock.
  bool rollbackLock(const std::string& resource);
  // True while this owner holds `resource` through the service (its own
  // view: an expired lock reads as held until released).
  bool holdsLock(const std::string& resource);
  // The mode this owner holds `resource` in through the service (same
  // view as holdsLock); nullopt when it holds nothing.
  std::optional<LockMode> heldMode(const std::string& resource);

 private:
  using Id = std::pair<std::string, std::string>;  // (owner, resource)
  // Moves this owner's Lock for `resource` out of the map (so no other
  // thread touches it while it is used without the mutex).
  bool take(const Id& id, Lock& out);
  void put(const Id& id, Lock lock);
  // Runs `call` on this owner's held lock on `resource` (LOCK_NOT_HELD when
  // there is none) and keeps the lock afterwards unless it was lost.
  void withHeldLock(const std::string& resource,
                    const std::function<void(Lock&)>& call);
  bool acquire(const std::string& resource, std::chrono::milliseconds ttl,
               const std::chrono::milliseconds* waitTime, LockMode mode);

  DistributedLockManager& manager_;
  LockLevel level_;
  std::mutex mutex_;  // guards locks_
  std::map<Id, Lock> locks_;
};

}  // namespace dlm
