#include "dlm/lock_guard.h"

#include <fmt/format.h>

#include <chrono>
#include <utility>

#include "dlm/lock_manager.h"
#include "manager/keep_alive.h"
#include "manager/manager_impl.h"

namespace dlm {

LockGuard::LockGuard() noexcept = default;

LockGuard::LockGuard(DistributedLockManager& manager, Lock lock,
                     KeepAliveOptions keepAlive) {
  manager.impl_->checkOwnLock(lock);
  if (!lock.isAcquired()) {
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("a LockGuard needs an acquired lock; '{}' is not held",
                    lock.key()));
  }
  manager_ = &manager;
  lock_ = std::move(lock);
  if (keepAlive.enabled) {
    const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(
        lock_.expiresAt() - lock_.acquiredAt());
    keepAlive_ = manager.impl_->keepAlive().add(
        lock_.key_, lock_.mode_, lock_.token_, ttl, lock_.expiresAt(),
        lock_.leaseEnd_, lock_.lockId(), lock_.fencingToken(),
        std::move(keepAlive.onLost));
  }
}

LockGuard::LockGuard(LockGuard&& other) noexcept
    : manager_(std::exchange(other.manager_, nullptr)),
      lock_(std::move(other.lock_)),
      keepAlive_(std::move(other.keepAlive_)) {}

LockGuard& LockGuard::operator=(LockGuard&& other) noexcept {
  if (this != &other) {
    releaseQuietly();
    manager_ = std::exchange(other.manager_, nullptr);
    lock_ = std::move(other.lock_);
    keepAlive_ = std::move(other.keepAlive_);
  }
  return *this;
}

LockGuard::~LockGuard() { releaseQuietly(); }

bool LockGuard::lost() const {
  if (!keepAlive_) return false;
  std::lock_guard<std::mutex> lock(keepAlive_->mutex);
  return keepAlive_->lost;
}

bool LockGuard::holdsLock() const {
  return manager_ != nullptr && lock_.isAcquired() && !lost();
}

const Lock& LockGuard::lock() const {
  if (manager_ == nullptr) {
    throw DLMException(ErrorCode::INTERNAL_ERROR, "the LockGuard is empty");
  }
  return lock_;
}

StoreTime LockGuard::expiresAt() const {
  if (!keepAlive_) return lock_.expiresAt();
  std::lock_guard<std::mutex> lock(keepAlive_->mutex);
  return keepAlive_->expiresAt;
}

void LockGuard::stopKeepAlive() noexcept {
  if (!keepAlive_) return;
  manager_->impl_->keepAlive().remove(keepAlive_);
  {
    // The handle follows the renewals, for the release that comes next.
    std::lock_guard<std::mutex> lock(keepAlive_->mutex);
    if (!keepAlive_->lost) {
      lock_.expiresAt_ = keepAlive_->expiresAt;
      lock_.leaseEnd_ = keepAlive_->leaseEnd;
    }
  }
  keepAlive_.reset();
}

bool LockGuard::release() {
  if (manager_ == nullptr) return false;
  stopKeepAlive();
  const bool freed = manager_->releaseLock(lock_);
  manager_ = nullptr;
  return freed;
}

void LockGuard::commitLock(AppTransaction& tx) {
  if (manager_ == nullptr) {
    throw DLMException(ErrorCode::LOCK_NOT_HELD, "the LockGuard is empty");
  }
  // Renewing a lock whose release may already be committed would be wrong.
  stopKeepAlive();
  manager_->commitLock(lock_, tx);
}

void LockGuard::guardWithin(AppTransaction& tx) {
  if (manager_ == nullptr) {
    throw DLMException(ErrorCode::LOCK_NOT_HELD, "the LockGuard is empty");
  }
  manager_->guardWithin(lock_, tx);
}

void LockGuard::releaseQuietly() noexcept {
  if (manager_ == nullptr) return;
  try {
    release();
  } catch (const std::exception& e) {
    // A destructor must not throw: the failure goes to the manager's events
    // (RELEASE_FAILED). The manager keeps releasing the lock by its token in
    // the background until the store answers, so the key is not locked out
    // for the rest of its TTL.
    manager_->impl_->reportReleaseFailed(lock_, e);
    manager_->impl_->abandon(lock_);
    manager_ = nullptr;
  }
}

}  // namespace dlm
