#include "manager/manager_impl.h"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <map>
#include <utility>

#include "batching/store_calls.h"
#include "common/process_id.h"
#include "common/random_id.h"
#include "keys/owner_id.h"
#include "manager/in_doubt_resolver.h"
#include "manager/keep_alive.h"
#include "manager/messages.h"
#include "manager/release_wait_hub.h"
#include "manager/store_warning_relay.h"
#include "telemetry/telemetry.h"

namespace dlm {

using internal::lockName;
using internal::releaseBlockedByAppTransaction;
using std::chrono::milliseconds;

namespace {

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

}  // namespace

// --- lifecycle ---------------------------------------------------------------

DistributedLockManager::Impl::Impl(internal::ManagerSettings settings)
    : settings_(std::move(settings)),
      holder_{hostName(), 0},
      telemetry_(std::make_unique<internal::Telemetry>(settings_.clientId,
                                                       settings_.events)),
      warningRelay_(std::make_unique<internal::StoreWarningRelay>(
          *settings_.store, *telemetry_)),
      retry_(*settings_.store, *settings_.clock, settings_.config, *telemetry_),
      calls_(std::make_unique<internal::StoreCalls>(*settings_.store,
                                                    settings_.config)),
      hub_(std::make_unique<internal::ReleaseWaitHub>()),
      resolver_(std::make_unique<internal::InDoubtResolver>(
          *settings_.store, settings_.config.operationTimeout)) {
  store().addClient(settings_.clientId);
  StoreUsers::instance().add(&store());
}

DistributedLockManager::Impl::~Impl() {
  hub_->onMissedReleases(nullptr);  // before the keep-alive it calls goes
  keepAlive_.reset();
  resolver_.reset();
  stopWatchingReleases();
  if (state_.load() != kDestroyed) StoreUsers::instance().remove(&store());
}

void DistributedLockManager::Impl::initialize() {
  if (state_.load() == kDestroyed) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "the lock manager was destroyed");
  }
  // Applying migrations is idempotent (serialised and re-checked in the
  // store), so a transient failure may be retried like any call.
  withStoreRetries(nullptr, callDeadline(),
                   [&] { store().initialize(settings_.applyMigrations); });
  int expected = kNew;
  state_.compare_exchange_strong(expected, kReady);
}

void DistributedLockManager::Impl::destroy() {
  if (state_.exchange(kDestroyed) == kDestroyed) return;
  // Waiters see the state at once and throw.
  hub_->wakeAll();
  {
    std::lock_guard<std::mutex> lock(keepAliveMutex_);
    hub_->onMissedReleases(nullptr);  // before the keep-alive it calls goes
    keepAlive_.reset();
  }
  stopWatchingReleases();
  if (StoreUsers::instance().remove(&store())) store().close();
}

void DistributedLockManager::Impl::stopWaiting() {
  waitsStopped_.store(true);
  // After the flag: a waiter that missed the flag is woken, and sees it.
  hub_->wakeAll();
}

void DistributedLockManager::Impl::requireInitialized() const {
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

void DistributedLockManager::Impl::checkOwnLock(const Lock& lock) const {
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

Deadline DistributedLockManager::Impl::callDeadline() const {
  return deadlineAfter(settings_.config.operationTimeout);
}

Deadline DistributedLockManager::Impl::waitingCallDeadline(
    milliseconds timeout) const {
  const milliseconds operationTimeout = settings_.config.operationTimeout;
  return timeout > milliseconds::max() - operationTimeout
             ? Deadline::max()
             : deadlineAfter(timeout + operationTimeout);
}

// --- release announcements and keep-alive ------------------------------------

void DistributedLockManager::Impl::watchReleases() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (watchState_ == kWatching) return;
  // A store that could not announce releases when asked (its LISTEN
  // connection failed during an outage, say) is asked again now and then:
  // one bad moment must not leave this manager's waiters polling for good.
  if (watchState_ == kPolling &&
      clock().now() - pollingSince_ < internal::kResubscribeAfter) {
    return;
  }
  // Meanwhile, and for a store that cannot announce at all, the waiters
  // poll; that is always correct, only slower.
  bool watching = false;
  try {
    watching = store().subscribeReleases(hub_.get());
  } catch (const DLMException&) {
    watching = false;
  }
  watchState_ = watching ? kWatching : kPolling;
  if (!watching) pollingSince_ = clock().now();
}

void DistributedLockManager::Impl::stopWatchingReleases() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (watchState_ == kWatching) {
    try {
      store().unsubscribeReleases(hub_.get());
    } catch (const DLMException&) {
      // Nothing to do: the store stops delivering when it closes.
    }
  }
  watchState_ = kUnwatched;
}

internal::KeepAlive& DistributedLockManager::Impl::keepAlive() {
  std::lock_guard<std::mutex> lock(keepAliveMutex_);
  if (!keepAlive_) {
    keepAlive_ = std::make_unique<internal::KeepAlive>(
        store(), settings_.config.operationTimeout, telemetry_.get());
    // A store that may have lost announcements (or, on SQLite, whose file
    // vanished) may have lost leases too: renew them now. On SQLite the
    // guard subscribes for that (a local watch on the file); on PostgreSQL
    // it does not open the LISTEN connection itself (that would make a
    // LockGuard wait for a server): a waiter of the manager does.
    hub_->onMissedReleases(
        [keepAlive = keepAlive_.get()] { keepAlive->renewAllNow(); });
    if (store().name() == "sqlite") watchReleases();
  }
  return *keepAlive_;
}

// --- attempts and releases ---------------------------------------------------

bool DistributedLockManager::Impl::attempt(Lock& lock, milliseconds ttl,
                                           Refusal* refusal,
                                           Deadline deadline) {
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
                                [&] { return calls_->tryAcquire(request); });
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
      holdAcquired(lock, owner, token, result, started, ttl);
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

void DistributedLockManager::Impl::holdAcquired(
    Lock& lock, const std::string& owner, const std::string& token,
    const AcquireResult& result, std::chrono::steady_clock::time_point started,
    milliseconds ttl) const {
  lock.acquired_ = true;
  lock.owner_ = owner;
  lock.token_ = token;
  lock.fencingToken_ = result.fencingToken;
  lock.acquiredAt_ = result.acquiredAt;
  lock.expiresAt_ = result.expiresAt;
  lock.leaseEnd_ = started + ttl;
}

bool DistributedLockManager::Impl::releaseOwnLeftovers(const std::string& owner,
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

bool DistributedLockManager::Impl::releaseByToken(Lock& lock) {
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
      return calls_->release(lock.key_, lock.token_, lock.mode_);
    } catch (const DLMException& e) {
      // The reply may be what was lost: the release may have committed.
      mayHaveRun = mayHaveRun || e.transient();
      // After commitLock, the application's transaction keeps the hold's
      // row (PostgreSQL) or the file's write lock (SQLite) until it ends:
      // retrying a wait for it cannot help while it is open.
      if (lock.isReleasePending() &&
          e.code() == ErrorCode::RETRIES_EXHAUSTED) {
        throw DLMException(ErrorCode::RETRIES_EXHAUSTED,
                           releaseBlockedByAppTransaction(lock, e.what()));
      }
      throw;
    }
  });
  // A repeated release that finds the key held by a newer acquisition:
  // the earlier try freed it (its reply was lost) and someone took the key
  // since. The hold was intact until the release, which is what true means.
  if (!freed && mayHaveRun && sentInLease) freed = true;
  settleRelease(lock, freed, ttl, callStart);
  return freed;
}

void DistributedLockManager::Impl::settleRelease(
    Lock& lock, bool freed, milliseconds ttl,
    std::chrono::steady_clock::time_point callStart) {
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
    resolver_->addReleased(
        lock.key_, lock.mode_, std::move(lock.token_), std::move(lock.owner_),
        ttl > milliseconds::zero() ? ttl : settings_.config.lockTtl);
  }
  lock.clearAcquisition();
}

void DistributedLockManager::Impl::abandon(Lock& lock) noexcept {
  if (!lock.token_.empty()) {
    try {
      const auto ttl = std::chrono::duration_cast<milliseconds>(
          lock.expiresAt_ - lock.acquiredAt_);
      resolver_->addInDoubt(
          lock.key_, lock.mode_, lock.token_, lock.owner_,
          ttl > milliseconds::zero() ? ttl : settings_.config.lockTtl);
    } catch (...) {
      // Out of memory at worst: the lock then expires by its TTL.
    }
  }
  lock.clearAcquisition();
}

// --- reports -----------------------------------------------------------------

void DistributedLockManager::Impl::reportAcquired(
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

void DistributedLockManager::Impl::reportReleaseFailed(
    const Lock& lock, const std::exception& why) noexcept {
  telemetry_->releaseFailed();
  if (!telemetry_->reporting()) return;
  try {
    LockEvent event = internal::lockEvent(LockEventKind::RELEASE_FAILED, lock);
    const auto* dlmError = dynamic_cast<const DLMException*>(&why);
    event.code =
        dlmError != nullptr ? dlmError->code() : ErrorCode::INTERNAL_ERROR;
    event.message = why.what();
    telemetry_->emit(event);
  } catch (...) {
    // Out of memory building the event: the count is kept.
  }
}

}  // namespace dlm
