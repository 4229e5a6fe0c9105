#include "dlm/clustered_lock_service.h"

#include "dlm/owner.h"
#include "manager/manager_impl.h"

namespace dlm {

using std::chrono::milliseconds;

ClusteredLockService::ClusteredLockService(DistributedLockManager& manager,
                                           LockLevel level)
    : manager_(manager), level_(level) {}

ClusteredLockService::~ClusteredLockService() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [id, held] : locks_) {
    try {
      manager_.releaseLock(held);
    } catch (const std::exception& e) {
      // The lock expires by its TTL; a destructor must not throw, so the
      // failure goes to the manager's events (RELEASE_FAILED).
      manager_.impl_->reportReleaseFailed(held, e);
    }
  }
}

bool ClusteredLockService::take(const Id& id, Lock& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = locks_.find(id);
  if (it == locks_.end()) return false;
  out = std::move(it->second);
  locks_.erase(it);
  return true;
}

void ClusteredLockService::put(const Id& id, Lock lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  locks_.insert_or_assign(id, std::move(lock));
}

bool ClusteredLockService::acquire(const std::string& resource,
                                   milliseconds ttl,
                                   const milliseconds* waitTime,
                                   LockMode mode) {
  const Id id{currentOwner(), resource};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = locks_.find(id);
    if (it != locks_.end() && it->second.isAcquired()) {
      // EXCLUSIVE covers SHARED; SHARED does not cover EXCLUSIVE, and
      // waiting for it would wait for this very hold.
      if (mode == LockMode::EXCLUSIVE &&
          it->second.lockMode() == LockMode::SHARED) {
        throw DLMException(ErrorCode::INVALID_ARGUMENT,
                           "'" + resource +
                               "' is held SHARED by this owner; release it "
                               "before asking for it EXCLUSIVE");
      }
      return true;
    }
  }
  // A handle left pending by commitLock is done with once a new lock is
  // asked for: its transaction has ended one way or the other.
  Lock lock = manager_.getLockInstance(resource, level_, mode);
  try {
    if (waitTime == nullptr) {
      manager_.tryAcquireLock(lock, ttl);
    } else {
      manager_.acquireLock(lock, ttl, *waitTime);
    }
  } catch (const DLMException& e) {
    if (e.code() == ErrorCode::LOCK_UNAVAILABLE) return false;
    throw;
  }
  put(id, std::move(lock));
  return true;
}

bool ClusteredLockService::getLock(const std::string& resource,
                                   milliseconds ttl) {
  return acquire(resource, ttl, nullptr, LockMode::EXCLUSIVE);
}

bool ClusteredLockService::getLock(const std::string& resource,
                                   milliseconds ttl, milliseconds waitTime) {
  return acquire(resource, ttl, &waitTime, LockMode::EXCLUSIVE);
}

bool ClusteredLockService::getLock(const std::string& resource,
                                   milliseconds ttl, LockMode mode) {
  return acquire(resource, ttl, nullptr, mode);
}

bool ClusteredLockService::getLock(const std::string& resource,
                                   milliseconds ttl, milliseconds waitTime,
                                   LockMode mode) {
  return acquire(resource, ttl, &waitTime, mode);
}

// release, commit and rollback: `lock` starts as a placeholder; take()
// replaces it with this owner's stored handle, whose own mode and token the
// manager acts on.
bool ClusteredLockService::releaseLock(const std::string& resource) {
  const Id id{currentOwner(), resource};
  Lock lock = manager_.getLockInstance(resource, level_);
  if (!take(id, lock)) return false;
  try {
    return manager_.releaseLock(lock);
  } catch (...) {
    put(id, std::move(lock));  // still held: the call may be repeated
    throw;
  }
}

// The manager's rollbackLock is its releaseLock (by token, in dlm's own
// transaction), pending commit or not; so is this one.
bool ClusteredLockService::rollbackLock(const std::string& resource) {
  return releaseLock(resource);
}

void ClusteredLockService::withHeldLock(
    const std::string& resource, const std::function<void(Lock&)>& call) {
  const Id id{currentOwner(), resource};
  Lock lock = manager_.getLockInstance(resource, level_);
  if (!take(id, lock)) {
    throw DLMException(ErrorCode::LOCK_NOT_HELD,
                       "'" + resource + "' is not held by this owner");
  }
  try {
    call(lock);
  } catch (...) {
    // Still this owner's to release unless the call found it lost.
    if (lock.isAcquired()) put(id, std::move(lock));
    throw;
  }
  put(id, std::move(lock));
}

void ClusteredLockService::commitLock(const std::string& resource,
                                      AppTransaction& tx) {
  // Kept afterwards (release pending) so rollbackLock can free it if tx
  // rolls back.
  withHeldLock(resource, [&](Lock& lock) { manager_.commitLock(lock, tx); });
}

void ClusteredLockService::guardWithin(const std::string& resource,
                                       AppTransaction& tx) {
  withHeldLock(resource, [&](Lock& lock) { manager_.guardWithin(lock, tx); });
}

bool ClusteredLockService::holdsLock(const std::string& resource) {
  return heldMode(resource).has_value();
}

std::optional<LockMode> ClusteredLockService::heldMode(
    const std::string& resource) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = locks_.find({currentOwner(), resource});
  if (it == locks_.end() || !it->second.isAcquired()) return std::nullopt;
  return it->second.lockMode();
}

}  // namespace dlm
