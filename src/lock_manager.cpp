#include "dlm/lock_manager.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <utility>

#include "dlm/error.h"
#include "keep_alive.h"
#include "key_builder.h"
#include "owner_id.h"
#include "process_id.h"
#include "random_id.h"
#include "validation.h"
#include "wait_hub.h"

namespace dlm {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kMaxTtl = std::chrono::hours(24 * 365);

std::string levelName(LockLevel level) {
  return level == LockLevel::DC ? "DC" : "XDC";
}

std::string lockName(const Lock& lock) {
  return fmt::format("lock '{}' ({})", lock.lockId(),
                     levelName(lock.lockLevel()));
}

std::string hostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

void validateTtl(milliseconds ttl) {
  internal::requirePositive("ttl", ttl);
  if (ttl > kMaxTtl) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("ttl of {} ms is over the 365-day limit", ttl.count()));
  }
}

}  // namespace

// --- builder -----------------------------------------------------------------

DistributedLockManager::Builder DistributedLockManager::builder() {
  return Builder();
}

using Builder = DistributedLockManager::Builder;

Builder& Builder::clientId(std::string clientId) {
  clientId_ = std::move(clientId);
  return *this;
}
Builder& Builder::farmId(std::string farmId) {
  farmId_ = std::move(farmId);
  return *this;
}
Builder& Builder::store(std::shared_ptr<LockStore> store) {
  store_ = std::move(store);
  return *this;
}
Builder& Builder::configuration(LockConfiguration configuration) {
  config_ = configuration;
  return *this;
}
Builder& Builder::separator(char separator) {
  separator_ = separator;
  return *this;
}
Builder& Builder::hierarchy(bool enabled) {
  hierarchy_ = enabled;
  return *this;
}
Builder& Builder::applyMigrations(bool apply) {
  applyMigrations_ = apply;
  return *this;
}
Builder& Builder::clock(std::shared_ptr<Clock> clock) {
  clock_ = std::move(clock);
  return *this;
}

std::unique_ptr<DistributedLockManager> Builder::build() {
  internal::validateScopeName("clientId", clientId_, /*required=*/true);
  internal::validateScopeName("farmId", farmId_, /*required=*/false);
  if (!store_) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "no store given");
  }
  config_.validate();
  // Printable ASCII keeps separator + 1 (the end of the descendant range) a
  // byte that sorts right after it.
  if (separator_ < 0x21 || separator_ > 0x7E || separator_ == '#') {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "separator must be printable ASCII other than '#'");
  }
  // The constructor is private, so make_unique cannot reach it.
  std::unique_ptr<DistributedLockManager> m(new DistributedLockManager());
  m->clientId_ = clientId_;
  m->farmId_ = farmId_;
  m->separator_ = separator_;
  m->hierarchy_ = hierarchy_;
  m->applyMigrations_ = applyMigrations_;
  m->config_ = config_;
  m->store_ = store_;
  m->clock_ = clock_ ? clock_ : Clock::system();
  m->holder_.host = hostName();
  return m;
}

// --- lifecycle ---------------------------------------------------------------

DistributedLockManager::DistributedLockManager()
    : hub_(std::make_unique<internal::WaitHub>()) {}

DistributedLockManager::~DistributedLockManager() {
  // Renewals and release announcements call into the store and the hub;
  // stop both before the members go.
  keepAlive_.reset();
  stopWatchingReleases();
}

void DistributedLockManager::initialize() {
  if (state_.load() == kDestroyed) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "the lock manager was destroyed");
  }
  store_->initialize(applyMigrations_);
  int expected = kNew;
  state_.compare_exchange_strong(expected, kReady);
}

void DistributedLockManager::destroy() {
  if (state_.exchange(kDestroyed) == kDestroyed) return;
  {
    std::lock_guard<std::mutex> lock(keepAliveMutex_);
    keepAlive_.reset();
  }
  stopWatchingReleases();
  store_->close();
}

void DistributedLockManager::watchReleases() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (watchState_ != kUnwatched) return;
  // A store that cannot announce releases (or fails to start) leaves the
  // waiters to poll; that is always correct, only slower.
  bool watching = false;
  try {
    watching = store_->subscribeReleases(hub_.get());
  } catch (const DLMException&) {
    watching = false;
  }
  watchState_ = watching ? kWatching : kPolling;
}

void DistributedLockManager::stopWatchingReleases() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (watchState_ == kWatching) {
    try {
      store_->unsubscribeReleases(hub_.get());
    } catch (const DLMException&) {
      // Nothing to do: the store stops delivering when it closes.
    }
  }
  watchState_ = kUnwatched;
}

internal::KeepAlive& DistributedLockManager::keepAlive() {
  std::lock_guard<std::mutex> lock(keepAliveMutex_);
  if (!keepAlive_) keepAlive_ = std::make_unique<internal::KeepAlive>(*store_);
  return *keepAlive_;
}

void DistributedLockManager::requireInitialized() const {
  switch (state_.load()) {
    case kReady:
      return;
    case kNew:
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         "the lock manager is not initialized; call "
                         "initialize() first");
    default:
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         "the lock manager was destroyed");
  }
}

void DistributedLockManager::checkOwnLock(const Lock& lock) const {
  if (lock.manager_ == nullptr) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "the Lock was moved from and names no lock");
  }
  if (lock.manager_ != this) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("{} was made by another lock manager", lockName(lock)));
  }
}

// --- locks -------------------------------------------------------------------

Lock DistributedLockManager::getLockInstance(const std::string& id,
                                             LockLevel level,
                                             LockMode mode) const {
  internal::validateLockId(id);
  if (mode != LockMode::EXCLUSIVE) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "only LockMode::EXCLUSIVE is supported");
  }
  if (level == LockLevel::DC && farmId_.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "DC locks need a farmId; set one on the builder");
  }
  if (level != LockLevel::DC && level != LockLevel::XDC) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "unknown lock level");
  }
  const internal::KeyScope scope{farmId_, clientId_, separator_, hierarchy_};
  Lock lock;
  lock.key_ = internal::buildStoreKey(level, scope, id);
  lock.id_ = id;
  lock.clientId_ = clientId_;
  lock.farmId_ = farmId_;
  lock.level_ = level;
  lock.mode_ = mode;
  lock.manager_ = this;
  return lock;
}

// Retries transient store failures with doubling backoff. Safe for every
// store call: acquire is idempotent on its token and release/extend are
// conditional on it, so a call whose reply was lost can be repeated.
template <typename Fn>
auto DistributedLockManager::withStoreRetries(const Lock& lock, Fn&& fn) {
  milliseconds backoff = config_.storeRetryBackoff;
  for (int retry = 0;; ++retry) {
    try {
      return fn();
    } catch (const DLMException& e) {
      if (!e.transient()) throw;
      if (retry >= config_.storeRetries) {
        const ErrorCode code = e.code() == ErrorCode::CONNECTION_ERROR
                                   ? ErrorCode::CONNECTION_ERROR
                                   : ErrorCode::RETRIES_EXHAUSTED;
        throw DLMException(
            code, fmt::format("{}: {} store call failed after {} retries: {}",
                              lockName(lock), store_->name(), retry, e.what()));
      }
    }
    clock_->sleepFor(backoff);
    backoff *= 2;
  }
}

bool DistributedLockManager::attempt(Lock& lock, milliseconds ttl,
                                     std::string* blockedBy) {
  const std::string token = internal::randomUuid();
  const std::string& owner = internal::currentThreadOwner();
  const Holder holder{holder_.host,
                      static_cast<std::int64_t>(internal::currentProcessId())};
  const AcquireRequest request{lock.key_, owner, token, ttl, holder};
  const AcquireResult result =
      withStoreRetries(lock, [&] { return store_->tryAcquire(request); });
  if (!result.acquired) {
    *blockedBy = result.blockedBy;
    return false;
  }
  lock.acquired_ = true;
  lock.owner_ = owner;
  lock.token_ = token;
  lock.fencingToken_ = result.fencingToken;
  lock.acquiredAt_ = result.acquiredAt;
  lock.expiresAt_ = result.expiresAt;
  return true;
}

namespace {

[[noreturn]] void throwAlreadyHeld(const Lock& lock) {
  throw DLMException(
      ErrorCode::LOCK_UNAVAILABLE,
      fmt::format("{} is already held through this Lock (locks are not "
                  "re-entrant)",
                  lockName(lock)));
}

std::string blockedMessage(const Lock& lock, const std::string& blockedBy) {
  if (blockedBy.empty() || blockedBy == lock.storeKey()) {
    return fmt::format("{} is held by someone else", lockName(lock));
  }
  return fmt::format("{} is blocked by the held lock '{}'", lockName(lock),
                     blockedBy);
}

}  // namespace

void DistributedLockManager::tryAcquireLock(Lock& lock) {
  tryAcquireLock(lock, config_.lockTtl);
}

void DistributedLockManager::tryAcquireLock(Lock& lock, milliseconds ttl) {
  checkOwnLock(lock);
  validateTtl(ttl);
  requireInitialized();
  if (lock.isAcquired()) throwAlreadyHeld(lock);
  std::string blockedBy;
  if (!attempt(lock, ttl, &blockedBy)) {
    throw DLMException(ErrorCode::LOCK_UNAVAILABLE,
                       blockedMessage(lock, blockedBy));
  }
}

void DistributedLockManager::acquireLock(Lock& lock) {
  acquireLock(lock, config_.lockTtl, config_.waitForLock);
}

void DistributedLockManager::acquireLock(Lock& lock, milliseconds ttl) {
  acquireLock(lock, ttl, config_.waitForLock);
}

void DistributedLockManager::acquireLock(Lock& lock, milliseconds ttl,
                                         milliseconds timeout) {
  checkOwnLock(lock);
  validateTtl(ttl);
  internal::requireNonNegative("timeout", timeout);
  requireInitialized();
  if (lock.isAcquired()) throwAlreadyHeld(lock);

  // A timeout too large to add to now() waits forever.
  const Clock::TimePoint start = clock_->now();
  const Clock::TimePoint deadline =
      timeout >= std::chrono::duration_cast<milliseconds>(
                     Clock::TimePoint::max() - start)
          ? Clock::TimePoint::max()
          : start + timeout;
  std::string blockedBy;
  if (attempt(lock, ttl, &blockedBy)) return;
  waitForLock(lock, ttl, deadline, timeout, blockedBy);
}

namespace {

// Deletes the waiter's request row however the wait ends. A failure here is
// harmless: the row expires at the waiter's deadline and is then ignored.
class RequestRow {
 public:
  RequestRow(LockStore& store, const std::string& key, std::string owner)
      : store_(store), key_(key), owner_(std::move(owner)) {}
  ~RequestRow() {
    try {
      store_.unregisterWait(key_, owner_);
    } catch (const DLMException&) {
    }
  }
  RequestRow(const RequestRow&) = delete;
  RequestRow& operator=(const RequestRow&) = delete;

 private:
  LockStore& store_;
  const std::string& key_;
  std::string owner_;
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
                                         milliseconds timeout,
                                         std::string& blockedBy) {
  auto timedOut = [&] {
    return DLMException(
        ErrorCode::LOCK_UNAVAILABLE,
        fmt::format("{} (gave up after {} ms)", blockedMessage(lock, blockedBy),
                    timeout.count()));
  };
  if (clock_->now() >= deadline) throw timedOut();

  // Listen for releases before the next attempt, so a release between that
  // attempt and the sleep still ends the sleep.
  watchReleases();
  internal::WaitHub::Waiter waiter(lock.key_);
  internal::WaitHub::Registration registration(*hub_, waiter);

  const std::string owner = internal::currentThreadOwner();
  const auto left = [&] {
    return std::chrono::ceil<milliseconds>(deadline - clock_->now());
  };
  const milliseconds maxWait =
      std::clamp(left() + milliseconds(1000), milliseconds(1), kMaxTtl);
  const WaitRegistration registered = withStoreRetries(lock, [&] {
    return store_->registerWait(WaitRequest{lock.key_, owner, maxWait});
  });
  if (!registered.deadlockCycle.empty()) {
    throw DLMException(
        ErrorCode::DEADLOCK_DETECTED,
        fmt::format("{}: waiting would deadlock: {}", lockName(lock),
                    describeCycle(registered.deadlockCycle)));
  }
  RequestRow requestRow(*store_, lock.key_.key, owner);

  for (;;) {
    waiter.signal.reset();
    if (attempt(lock, ttl, &blockedBy)) return;
    if (clock_->now() >= deadline) throw timedOut();
    // Never sleep past the deadline; the loop makes a last attempt there.
    milliseconds sleep = config_.sleepBetweenRetries;
    if (config_.retryJitter > 0) {
      sleep -= std::chrono::duration_cast<milliseconds>(
          sleep * (config_.retryJitter * internal::randomFraction()));
    }
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

bool DistributedLockManager::releaseByToken(Lock& lock) {
  requireInitialized();
  const bool freed = withStoreRetries(
      lock, [&] { return store_->release(lock.key_, lock.token_); });
  lock.clearAcquisition();
  return freed;
}

bool DistributedLockManager::releaseLock(Lock& lock) {
  checkOwnLock(lock);
  if (!lock.isAcquired() && !lock.isReleasePending()) return false;
  return releaseByToken(lock);
}

bool DistributedLockManager::rollbackLock(Lock& lock) {
  return releaseLock(lock);
}

void DistributedLockManager::commitLock(Lock& lock, AppTransaction& tx) {
  checkOwnLock(lock);
  requireInitialized();
  if (!lock.isAcquired()) {
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{} is not held through this Lock", lockName(lock)));
  }
  try {
    // No retries: the statement runs in the application's transaction, which
    // a failure has already spoiled.
    store_->releaseWithin(tx, lock.key_, lock.token_);
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

void DistributedLockManager::extendLock(Lock& lock) {
  extendLock(lock, config_.lockTtl);
}

void DistributedLockManager::extendLock(Lock& lock, milliseconds ttl) {
  checkOwnLock(lock);
  validateTtl(ttl);
  requireInitialized();
  if (!lock.isAcquired()) {
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{} is not held through this Lock", lockName(lock)));
  }
  const std::optional<StoreTime> expires = withStoreRetries(
      lock, [&] { return store_->extend(lock.key_.key, lock.token_, ttl); });
  if (!expires) {
    lock.clearAcquisition();
    throw DLMException(
        ErrorCode::LOCK_NOT_HELD,
        fmt::format("{} expired and was taken over", lockName(lock)));
  }
  lock.expiresAt_ = *expires;
}

std::optional<LockRecord> DistributedLockManager::describeLock(
    const Lock& lock) {
  checkOwnLock(lock);
  requireInitialized();
  std::optional<LockRecord> row =
      withStoreRetries(lock, [&] { return store_->describe(lock.key_.key); });
  if (row && !row->held) return std::nullopt;
  return row;
}

}  // namespace dlm
