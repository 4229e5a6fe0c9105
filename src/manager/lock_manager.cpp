#include "dlm/lock_manager.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <utility>

#include "dlm/error.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"
#include "manager/in_doubt_resolver.h"
#include "manager/keep_alive.h"
#include "keys/key_builder.h"
#include "manager/lock_manager_internal.h"
#include "keys/owner_id.h"
#include "common/process_id.h"
#include "common/random_id.h"
#include "telemetry/telemetry.h"
#include "keys/validation.h"
#include "manager/store_warning_relay.h"
#include "manager/wait_hub.h"

namespace dlm {

using internal::blockedMessage;
using internal::kMaxTtl;
using internal::lockName;

namespace {

using std::chrono::milliseconds;

std::string hostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// How many managers that were built and not yet destroyed use each store:
// destroy() closes a store only when it was the last.
class StoreUsers {
 public:
  static StoreUsers& instance() {
    static StoreUsers users;
    return users;
  }
  void add(const LockStore* store) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_[store];
  }
  // True when `store` has no user left.
  bool remove(const LockStore* store) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = count_.find(store);
    if (it == count_.end()) return true;
    if (--it->second > 0) return false;
    count_.erase(it);
    return true;
  }

 private:
  std::mutex mutex_;
  std::map<const LockStore*, int> count_;
};

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
Builder& Builder::events(std::shared_ptr<LockEventHandler> handler) {
  events_ = std::move(handler);
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
  m->telemetry_ = std::make_unique<internal::Telemetry>(clientId_, events_);
  m->warningRelay_ =
      std::make_unique<internal::StoreWarningRelay>(*m->store_, *m->telemetry_);
  m->seenReconnections_ = m->store_->reconnections();
  m->resolver_ = std::make_unique<internal::InDoubtResolver>(
      *m->store_, m->config_.operationTimeout);
  m->store_->addClient(m->clientId_);
  StoreUsers::instance().add(m->store_.get());
  return m;
}

// --- lifecycle ---------------------------------------------------------------

DistributedLockManager::DistributedLockManager()
    : hub_(std::make_unique<internal::WaitHub>()) {}

DistributedLockManager::~DistributedLockManager() {
  // Renewals, background releases and release announcements call into the
  // store and the hub; stop them before the members go.
  keepAlive_.reset();
  resolver_.reset();
  stopWatchingReleases();
  if (state_.load() != kDestroyed) StoreUsers::instance().remove(store_.get());
}

Deadline DistributedLockManager::callDeadline() const {
  return deadlineAfter(config_.operationTimeout);
}

void DistributedLockManager::initialize() {
  if (state_.load() == kDestroyed) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "the lock manager was destroyed");
  }
  // Applying migrations is idempotent (serialised and re-checked in the
  // store), so a transient failure may be retried like any call.
  withStoreRetries(nullptr, callDeadline(),
                   [&] { store_->initialize(applyMigrations_); });
  int expected = kNew;
  state_.compare_exchange_strong(expected, kReady);
}

void DistributedLockManager::destroy() {
  if (state_.exchange(kDestroyed) == kDestroyed) return;
  // Waiters see the state at once and throw.
  hub_->wakeAll();
  {
    std::lock_guard<std::mutex> lock(keepAliveMutex_);
    keepAlive_.reset();
  }
  stopWatchingReleases();
  if (StoreUsers::instance().remove(store_.get())) store_->close();
}

void DistributedLockManager::stopWaiting() {
  waitsStopped_.store(true);
  // After the flag: a waiter that missed the flag is woken, and sees it.
  hub_->wakeAll();
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
  if (!keepAlive_) {
    keepAlive_ = std::make_unique<internal::KeepAlive>(
        *store_, config_.operationTimeout, telemetry_.get());
  }
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
  if (mode != LockMode::EXCLUSIVE && mode != LockMode::SHARED) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "unknown lock mode");
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

bool DistributedLockManager::attempt(Lock& lock, milliseconds ttl,
                                     Refusal* refusal, Deadline deadline) {
  const std::string& owner = internal::currentThreadOwner();
  const Holder holder{holder_.host,
                      static_cast<std::int64_t>(internal::currentProcessId())};
  for (int round = 0;; ++round) {
    const std::string token = internal::randomGuid();
    const AcquireRequest request{lock.key_, owner,  token,
                                 ttl,       holder, lock.mode_};
    const auto started = std::chrono::steady_clock::now();
    ++refusal->attempts;
    AcquireResult result;
    try {
      result = withStoreRetries(&lock, deadline,
                                [&] { return store_->tryAcquire(request); });
    } catch (const DLMException& e) {
      // The store may have committed the acquisition and lost the reply:
      // free it by token once the store answers again.
      if (e.code() == ErrorCode::CONNECTION_ERROR ||
          e.code() == ErrorCode::RETRIES_EXHAUSTED) {
        resolver_->addInDoubt(lock.key_, lock.mode_, token, owner, ttl);
      }
      throw;
    }
    if (result.acquired) {
      lock.acquired_ = true;
      lock.owner_ = owner;
      lock.token_ = token;
      lock.fencingToken_ = result.fencingToken;
      lock.acquiredAt_ = result.acquiredAt;
      lock.expiresAt_ = result.expiresAt;
      lock.leaseEnd_ = started + ttl;
      return true;
    }
    refusal->blockedBy = result.blockedBy;
    refusal->queued = result.queued;
    if (round > 0 || result.queued ||
        !releaseOwnLeftovers(owner, refusal->blockedBy, deadline,
                             /*related=*/false)) {
      telemetry_->refused();
      return false;
    }
  }
}

bool DistributedLockManager::releaseOwnLeftovers(const std::string& owner,
                                                 const std::string& key,
                                                 Deadline deadline,
                                                 bool related) {
  using Match = internal::InDoubtResolver::Match;
  if (key.empty()) return false;
  try {
    const DeadlineScope scope(deadline);
    return resolver_->releaseLeftovers(
        owner, key, related ? Match::kConflicting : Match::kExact);
  } catch (const DLMException&) {
    // The background resolver keeps trying; this attempt stays refused.
    return false;
  }
}

LockMetrics DistributedLockManager::metrics() const {
  return telemetry_->snapshot();
}

void DistributedLockManager::reportAcquired(
    const Lock& lock, std::chrono::steady_clock::time_point callStart,
    int attempts) {
  const auto took = std::chrono::steady_clock::now() - callStart;
  telemetry_->acquired(took);
  if (!telemetry_->reporting()) return;
  LockEvent event = internal::lockEvent(LockEventKind::ACQUIRED, lock);
  event.waited = std::chrono::duration_cast<milliseconds>(took);
  event.attempts = attempts;
  telemetry_->emit(event);
}

void DistributedLockManager::reportWaiting(const Lock& lock,
                                           const Refusal& refusal,
                                           Clock::TimePoint waitStart) {
  if (!telemetry_->reporting()) return;
  LockEvent event = internal::lockEvent(LockEventKind::WAITING, lock);
  event.waited =
      std::chrono::duration_cast<milliseconds>(clock_->now() - waitStart);
  event.attempts = refusal.attempts;
  if (!refusal.blockedBy.empty()) {
    LockBlocker blocker;
    blocker.key = refusal.blockedBy;
    blocker.queued = refusal.queued;
    LockStoreAdmin* admin = store_->admin();
    if (!refusal.queued && admin != nullptr) {
      // Who holds it: one more store call, made only for the report.
      try {
        const DeadlineScope scope(callDeadline());
        // The EXCLUSIVE holder, or the oldest SHARED one.
        const auto holders = admin->holdersOf(refusal.blockedBy);
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
    }
    event.blocker = std::move(blocker);
  }
  telemetry_->emit(event);
}

void DistributedLockManager::reportStoreError(const DLMException& e) {
  telemetry_->storeError(e.code());
  if (!telemetry_->reporting()) return;
  LockEvent event;
  event.kind = LockEventKind::STORE_ERROR;
  event.code = e.code();
  event.message = e.what();  // stores' messages carry no password
  telemetry_->emit(event);
}

void DistributedLockManager::checkReconnections() noexcept try {
  const std::uint64_t now = store_->reconnections();
  std::uint64_t seen = seenReconnections_.load(std::memory_order_relaxed);
  while (now > seen) {
    if (!seenReconnections_.compare_exchange_weak(seen, now)) continue;
    for (std::uint64_t i = seen; i < now; ++i) telemetry_->reconnected();
    if (telemetry_->reporting()) {
      LockEvent event;
      event.kind = LockEventKind::STORE_RECONNECTED;
      event.code = ErrorCode::CONNECTION_ERROR;
      event.message = fmt::format(
          "the {} store replaced {} dead connection(s) with working ones",
          store_->name(), now - seen);
      telemetry_->emit(event);
    }
    return;
  }
} catch (...) {
  // Out of memory formatting the message: the count is kept.
}

void DistributedLockManager::abandon(Lock& lock) noexcept {
  if (!lock.token_.empty()) {
    try {
      const auto ttl = std::chrono::duration_cast<milliseconds>(
          lock.expiresAt_ - lock.acquiredAt_);
      resolver_->addInDoubt(lock.key_, lock.mode_, lock.token_, lock.owner_,
                            ttl > milliseconds::zero() ? ttl : config_.lockTtl);
    } catch (...) {
      // Out of memory at worst: the lock then expires by its TTL.
    }
  }
  lock.clearAcquisition();
}

namespace {

[[noreturn]] void throwAlreadyHeld(const Lock& lock) {
  throw DLMException(
      ErrorCode::LOCK_UNAVAILABLE,
      fmt::format("{} is already held through this Lock (locks are not "
                  "re-entrant)",
                  lockName(lock)));
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
  const auto callStart = std::chrono::steady_clock::now();
  Refusal refusal;
  if (!attempt(lock, ttl, &refusal, callDeadline())) {
    throw DLMException(ErrorCode::LOCK_UNAVAILABLE,
                       blockedMessage(lock, refusal.blockedBy, refusal.queued));
  }
  reportAcquired(lock, callStart, refusal.attempts);
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
  // The whole call, store calls included, ends by timeout + operationTimeout
  // (saturating: both are bounded, but a huge timeout must not wrap).
  const Deadline callEnd =
      timeout > milliseconds::max() - config_.operationTimeout
          ? Deadline::max()
          : deadlineAfter(timeout + config_.operationTimeout);
  const auto callStart = std::chrono::steady_clock::now();
  Refusal refusal;
  if (!attempt(lock, ttl, &refusal, std::min(callEnd, callDeadline()))) {
    waitForLock(lock, ttl, deadline, callEnd, timeout, refusal);
  }
  reportAcquired(lock, callStart, refusal.attempts);
}

bool DistributedLockManager::releaseByToken(Lock& lock) {
  requireInitialized();
  const auto callStart = std::chrono::steady_clock::now();
  const auto ttl = std::chrono::duration_cast<milliseconds>(lock.expiresAt_ -
                                                            lock.acquiredAt_);
  // Sent while the lease was still valid by this process's conservative
  // estimate: nobody else could take the key before this release ran.
  const bool sentInLease = std::chrono::steady_clock::now() < lock.leaseEnd_;
  bool mayHaveRun = false;
  bool freed = withStoreRetries(&lock, callDeadline(), [&] {
    try {
      return store_->release(lock.key_, lock.token_, lock.mode_);
    } catch (const DLMException& e) {
      // The reply may be what was lost: the release may have committed.
      mayHaveRun = mayHaveRun || e.transient();
      throw;
    }
  });
  // A repeated release that finds the key held by a newer acquisition:
  // the earlier try freed it (its reply was lost) and someone took the key
  // since. The hold was intact until the release, which is what true means.
  if (!freed && mayHaveRun && sentInLease) freed = true;
  if (freed) {
    const auto now = std::chrono::steady_clock::now();
    telemetry_->released(now - callStart);
    if (telemetry_->reporting()) {
      LockEvent event = internal::lockEvent(LockEventKind::RELEASED, lock);
      // The lease began when the acquiring call did (leaseEnd_ - ttl).
      event.heldFor = std::chrono::duration_cast<milliseconds>(
          now - (lock.leaseEnd_ - ttl));
      telemetry_->emit(event);
    }
    // Committed lazily: remembered in case a server crash undoes it.
    resolver_->addReleased(lock.key_, lock.mode_, std::move(lock.token_),
                           std::move(lock.owner_),
                           ttl > milliseconds::zero() ? ttl : config_.lockTtl);
  }
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
    const DeadlineScope scope(callDeadline());
    store_->commitLock(tx, lock.key_, lock.token_, lock.mode_);
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
  const auto started = std::chrono::steady_clock::now();
  const std::optional<StoreTime> expires =
      withStoreRetries(&lock, callDeadline(), [&] {
        return store_->extend(lock.key_.key, lock.token_, ttl, lock.mode_);
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
  checkOwnLock(lock);
  requireInitialized();
  for (LockRecord& hold : describeHolders(lock)) return std::move(hold);
  return std::nullopt;
}

std::vector<LockRecord> DistributedLockManager::describeHolders(
    const Lock& lock) {
  checkOwnLock(lock);
  requireInitialized();
  LockStoreAdmin& admin = adminOf(*store_);  // INVALID_ARGUMENT without one
  std::vector<LockRecord> holds = withStoreRetries(
      &lock, callDeadline(), [&] { return admin.holdersOf(lock.key_.key); });
  holds.erase(std::remove_if(holds.begin(), holds.end(),
                             [](const LockRecord& r) { return !r.held; }),
              holds.end());
  return holds;
}

}  // namespace dlm
