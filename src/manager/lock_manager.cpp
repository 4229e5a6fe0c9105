// DistributedLockManager's calls: their arguments checked, then one attempt,
// a wait, a release, a commit, an extension or a look-up through the
// implementation (manager/manager_impl.h, manager/wait_loop.h).
#include "dlm/lock_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "dlm/error.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"
#include "batching/store_calls.h"
#include "keys/key_builder.h"
#include "keys/validation.h"
#include "manager/manager_impl.h"
#include "manager/messages.h"
#include "manager/wait_loop.h"
#include "telemetry/telemetry.h"

namespace dlm {

using internal::blockedMessage;
using internal::lockName;
using std::chrono::milliseconds;

void internal::validateTtl(milliseconds ttl) {
  internal::requirePositive("ttl", ttl);
  if (ttl > internal::kMaxTtl) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("ttl of {} ms is over the 365-day limit", ttl.count()));
  }
}

namespace {

using internal::validateTtl;

[[noreturn]] void throwAlreadyHeld(const Lock& lock) {
  throw DLMException(
      ErrorCode::LOCK_UNAVAILABLE,
      fmt::format("{} is already held through this Lock (locks are not "
                  "re-entrant)",
                  lockName(lock)));
}

[[noreturn]] void throwNotHeld(const Lock& lock) {
  throw DLMException(
      ErrorCode::LOCK_NOT_HELD,
      fmt::format("{} is not held through this Lock", lockName(lock)));
}

}  // namespace

// --- lifecycle ---------------------------------------------------------------

DistributedLockManager::DistributedLockManager(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

DistributedLockManager::~DistributedLockManager() = default;

void DistributedLockManager::initialize() { impl_->initialize(); }

void DistributedLockManager::destroy() { impl_->destroy(); }

void DistributedLockManager::stopWaiting() { impl_->stopWaiting(); }

const std::string& DistributedLockManager::clientId() const {
  return impl_->settings().clientId;
}

const std::string& DistributedLockManager::farmId() const {
  return impl_->settings().farmId;
}

const LockConfiguration& DistributedLockManager::configuration() const {
  return impl_->config();
}

LockStore& DistributedLockManager::store() { return impl_->store(); }

LockMetrics DistributedLockManager::metrics() const {
  return impl_->telemetry().snapshot();
}

// --- locks -------------------------------------------------------------------

Lock DistributedLockManager::getLockInstance(const std::string& id,
                                             LockLevel level,
                                             LockMode mode) const {
  const internal::ManagerSettings& settings = impl_->settings();
  internal::validateLockId(id);
  if (mode != LockMode::EXCLUSIVE && mode != LockMode::SHARED) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "unknown lock mode");
  }
  if (level == LockLevel::DC && settings.farmId.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "DC locks need a farmId; set one on the builder");
  }
  if (level != LockLevel::DC && level != LockLevel::XDC) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "unknown lock level");
  }
  const internal::KeyScope scope{settings.farmId, settings.clientId,
                                 settings.separator, settings.hierarchy};
  Lock lock;
  lock.key_ = internal::buildStoreKey(level, scope, id);
  lock.id_ = id;
  lock.clientId_ = settings.clientId;
  lock.farmId_ = settings.farmId;
  lock.level_ = level;
  lock.mode_ = mode;
  // The implementation checks that a Lock is its own by this identity.
  lock.manager_ = impl_.get();
  return lock;
}

void DistributedLockManager::tryAcquireLock(Lock& lock) {
  tryAcquireLock(lock, impl_->config().lockTtl);
}

void DistributedLockManager::tryAcquireLock(Lock& lock, milliseconds ttl) {
  impl_->checkOwnLock(lock);
  validateTtl(ttl);
  impl_->requireInitialized();
  if (lock.isAcquired()) throwAlreadyHeld(lock);
  const auto callStart = std::chrono::steady_clock::now();
  Impl::Refusal refusal;
  if (!impl_->attempt(lock, ttl, &refusal, impl_->callDeadline())) {
    throw DLMException(ErrorCode::LOCK_UNAVAILABLE,
                       blockedMessage(lock, refusal.blockedBy, refusal.queued));
  }
  impl_->reportAcquired(lock, callStart, refusal.attempts);
}

void DistributedLockManager::acquireLock(Lock& lock) {
  acquireLock(lock, impl_->config().lockTtl, impl_->config().waitForLock);
}

void DistributedLockManager::acquireLock(Lock& lock, milliseconds ttl) {
  acquireLock(lock, ttl, impl_->config().waitForLock);
}

void DistributedLockManager::acquireLock(Lock& lock, milliseconds ttl,
                                         milliseconds timeout) {
  impl_->checkOwnLock(lock);
  validateTtl(ttl);
  internal::requireNonNegative("timeout", timeout);
  impl_->requireInitialized();
  if (lock.isAcquired()) throwAlreadyHeld(lock);

  // A timeout too large to add to now() waits forever.
  const Clock::TimePoint start = impl_->clock().now();
  const Clock::TimePoint deadline =
      timeout >= std::chrono::duration_cast<milliseconds>(
                     Clock::TimePoint::max() - start)
          ? Clock::TimePoint::max()
          : start + timeout;
  // The whole call, store calls included, ends by timeout + operationTimeout.
  const Deadline callEnd = impl_->waitingCallDeadline(timeout);
  const auto callStart = std::chrono::steady_clock::now();
  Impl::Refusal refusal;
  if (!impl_->attempt(lock, ttl, &refusal,
                      std::min(callEnd, impl_->callDeadline()))) {
    Impl::WaitLoop(*impl_, lock, ttl, deadline, callEnd, timeout, refusal)
        .run();
  }
  impl_->reportAcquired(lock, callStart, refusal.attempts);
}

bool DistributedLockManager::releaseLock(Lock& lock) {
  impl_->checkOwnLock(lock);
  if (!lock.isAcquired() && !lock.isReleasePending()) return false;
  return impl_->releaseByToken(lock);
}

bool DistributedLockManager::rollbackLock(Lock& lock) {
  return releaseLock(lock);
}

void DistributedLockManager::commitLock(Lock& lock, AppTransaction& tx) {
  impl_->checkOwnLock(lock);
  impl_->requireInitialized();
  if (!lock.isAcquired()) throwNotHeld(lock);
  try {
    // No retries: the statement runs in the application's transaction, which
    // a failure has already spoiled.
    const DeadlineScope scope(impl_->callDeadline());
    impl_->store().commitLock(tx, lock.key_, lock.token_, lock.mode_);
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::LOCK_NOT_HELD) throw;
    lock.clearAcquisition();
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{} expired and was taken over; the application "
                    "transaction cannot commit: {}",
                    lockName(lock), e.what()));
  }
  lock.acquired_ = false;
  lock.releasePending_ = true;
}

void DistributedLockManager::guardWithin(Lock& lock, AppTransaction& tx) {
  impl_->checkOwnLock(lock);
  impl_->requireInitialized();
  if (!lock.isAcquired()) throwNotHeld(lock);
  try {
    // No retries, as for commitLock: the application's transaction is spoiled
    // by a failed statement.
    const DeadlineScope scope(impl_->callDeadline());
    impl_->store().guardWithin(tx, lock.key_, lock.token_, lock.mode_);
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::LOCK_NOT_HELD) throw;
    // The handle is left as it is: a lease that ended without a takeover can
    // still be released (or extended, then guarded in a new transaction).
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{}: its lease ended (it may have been taken over); the "
                    "application transaction cannot commit: {}",
                    lockName(lock), e.what()));
  }
}

void DistributedLockManager::extendLock(Lock& lock) {
  extendLock(lock, impl_->config().lockTtl);
}

void DistributedLockManager::extendLock(Lock& lock, milliseconds ttl) {
  impl_->checkOwnLock(lock);
  validateTtl(ttl);
  impl_->requireInitialized();
  if (!lock.isAcquired()) throwNotHeld(lock);
  const auto started = std::chrono::steady_clock::now();
  const std::optional<StoreTime> expires =
      impl_->withStoreRetries(&lock, impl_->callDeadline(), [&] {
        return impl_->calls().extend(lock.key_.key, lock.token_, ttl,
                                     lock.mode_);
      });
  if (!expires) {
    lock.clearAcquisition();
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{} expired and was taken over", lockName(lock)));
  }
  lock.expiresAt_ = *expires;
  lock.leaseEnd_ = started + ttl;
}

std::optional<LockRecord> DistributedLockManager::describeLock(
    const Lock& lock) {
  impl_->checkOwnLock(lock);
  impl_->requireInitialized();
  for (LockRecord& hold : describeHolders(lock)) return std::move(hold);
  return std::nullopt;
}

std::vector<LockRecord> DistributedLockManager::describeHolders(
    const Lock& lock) {
  impl_->checkOwnLock(lock);
  impl_->requireInitialized();
  LockStoreAdmin& admin = adminOf(impl_->store());  // INVALID_ARGUMENT without
  std::vector<LockRecord> holds =
      impl_->withStoreRetries(&lock, impl_->callDeadline(),
                              [&] { return admin.holdersOf(lock.key_.key); });
  holds.erase(std::remove_if(holds.begin(), holds.end(),
                             [](const LockRecord& r) { return !r.held; }),
              holds.end());
  return holds;
}

std::string DistributedLockManager::listedOwner(std::string_view owner) const {
  return impl_->store().listedOwner(owner);
}

}  // namespace dlm
