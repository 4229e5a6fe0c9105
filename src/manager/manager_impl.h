// DistributedLockManager::Impl: a manager's state and the machinery its
// calls share with LockGuard and the wait loop (one attempt, release by
// token, keep-alive, release announcements, the background resolver).
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/hidden.h"
#include "dlm/clock.h"
#include "dlm/deadline.h"
#include "dlm/lock_manager.h"
#include "manager/store_retry.h"

namespace dlm {

namespace internal {

class InDoubtResolver;
class KeepAlive;
class StoreCalls;
class StoreWarningRelay;
class Telemetry;
class ReleaseWaitHub;

// The longest TTL (and request lifetime) the manager accepts.
constexpr std::chrono::milliseconds kMaxTtl = std::chrono::hours(24 * 365);
// INVALID_ARGUMENT for a TTL that is not positive or over kMaxTtl.
void validateTtl(std::chrono::milliseconds ttl);

// How long a manager whose store could not subscribe it to release
// announcements polls before it asks again (at its next wait).
constexpr std::chrono::seconds kResubscribeAfter{30};

// What a manager is built from, as the builder validated it.
struct ManagerSettings {
  std::string clientId;
  std::string farmId;
  char separator = '.';
  bool hierarchy = true;
  bool applyMigrations = false;
  LockConfiguration config;
  std::shared_ptr<LockStore> store;
  std::shared_ptr<Clock> clock;              // never null
  std::shared_ptr<LockEventHandler> events;  // may be null
};

}  // namespace internal

class DLM_HIDDEN DistributedLockManager::Impl {
 public:
  // Why an attempt was refused: the key in the way, and whether it is a
  // queued request (fair queueing) rather than a hold.
  struct Refusal {
    std::string blockedBy;
    bool queued = false;
    int attempts = 0;  // store attempts made in this call so far
  };
  class WaitLoop;  // manager/wait_loop.h

  // Registers the manager as a user of the store (see destroy()).
  explicit Impl(internal::ManagerSettings settings);
  // Stops renewals, background releases and release announcements, which
  // call into the store and the hub, before the members go.
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const internal::ManagerSettings& settings() const { return settings_; }
  const LockConfiguration& config() const { return settings_.config; }
  LockStore& store() const { return *settings_.store; }
  // The store's acquire, release and extend, batched across this manager's
  // threads (batching/store_calls.h).
  internal::StoreCalls& calls() const { return *calls_; }
  Clock& clock() const { return *settings_.clock; }
  internal::Telemetry& telemetry() const { return *telemetry_; }
  internal::ReleaseWaitHub& hub() const { return *hub_; }
  internal::InDoubtResolver& resolver() const { return *resolver_; }
  // Retries of store calls; see StoreRetry::run.
  template <typename Fn>
  auto withStoreRetries(const Lock* lock, Deadline deadline, Fn&& fn) {
    return retry_.run(lock, deadline, std::forward<Fn>(fn));
  }

  // The lifecycle of DistributedLockManager (see its comments).
  void initialize();
  void destroy();
  void stopWaiting();
  bool destroyed() const { return state_.load() == kDestroyed; }
  bool waitsStopped() const { return waitsStopped_.load(); }
  // Throws INTERNAL_ERROR unless initialized and not destroyed.
  void requireInitialized() const;
  // Throws INVALID_ARGUMENT for a Lock of another manager or a moved-from
  // one.
  void checkOwnLock(const Lock& lock) const;
  // operationTimeout from now.
  Deadline callDeadline() const;
  // The end of a call that waits up to `timeout`: timeout +
  // operationTimeout from now (saturating: both are bounded, but a huge
  // timeout must not wrap).
  Deadline waitingCallDeadline(std::chrono::milliseconds timeout) const;

  // One store attempt under `deadline`; on success fills `lock`, else
  // says why not. An attempt blocked by a leftover of the calling owner
  // (see acquireLock) releases it and tries once more.
  bool attempt(Lock& lock, std::chrono::milliseconds ttl, Refusal* refusal,
               Deadline deadline);
  // Releases the calling owner's leftovers on `key` (with `related` also on
  // its ancestors and descendants); true when the key may now be free.
  bool releaseOwnLeftovers(const std::string& owner, const std::string& key,
                           Deadline deadline, bool related);
  // releaseLock's store call and report, for a lock held or pending.
  bool releaseByToken(Lock& lock);
  // Fills `lock` with the acquisition `result` that `token` made for
  // `owner`, by a call that began at `started` with `ttl`.
  void holdAcquired(Lock& lock, const std::string& owner,
                    const std::string& token, const AcquireResult& result,
                    std::chrono::steady_clock::time_point started,
                    std::chrono::milliseconds ttl) const;
  // One tryAcquireAll store attempt under `deadline` for `locks` (checked
  // by the caller); on success fills every lock, else says why not.
  bool attemptAll(const std::vector<Lock*>& locks,
                  std::chrono::milliseconds ttl, Refusal* refusal,
                  Deadline deadline);
  // releaseAll: the held locks of `locks` released in one store call.
  std::size_t releaseAllByToken(const std::vector<Lock*>& locks);
  // The guard gave up releasing `lock`: release it by token in the
  // background, and forget it in the handle.
  void abandon(Lock& lock) noexcept;

  // The keep-alive thread's owner, made with the first guard that asks.
  internal::KeepAlive& keepAlive();
  // Subscribes the wait hub to the store's release announcements once.
  void watchReleases();

  // Counts an acquisition and reports it (ACQUIRED).
  void reportAcquired(const Lock& lock,
                      std::chrono::steady_clock::time_point callStart,
                      int attempts);
  // A release the library gave up on without throwing (a destructor's):
  // counted and reported (RELEASE_FAILED).
  void reportReleaseFailed(const Lock& lock,
                           const std::exception& why) noexcept;

 private:
  void stopWatchingReleases();
  // After a release's store call: reports a freed lock and remembers its
  // lazily committed release; the handle holds nothing afterwards.
  void settleRelease(Lock& lock, bool freed, std::chrono::milliseconds ttl,
                     std::chrono::steady_clock::time_point callStart);

  const internal::ManagerSettings settings_;
  const Holder holder_;  // this host; the pid is read per attempt
  const std::unique_ptr<internal::Telemetry> telemetry_;
  // Store warnings -> STORE_WARNING events; goes before telemetry_.
  const std::unique_ptr<internal::StoreWarningRelay> warningRelay_;
  internal::StoreRetry retry_;
  const std::unique_ptr<internal::StoreCalls> calls_;
  const std::unique_ptr<internal::ReleaseWaitHub> hub_;
  std::unique_ptr<internal::InDoubtResolver> resolver_;

  std::mutex watchMutex_;  // guards watchState_ and pollingSince_
  enum WatchState { kUnwatched, kWatching, kPolling };
  WatchState watchState_ = kUnwatched;
  // When a subscription last failed (kPolling): asked again after
  // internal::kResubscribeAfter.
  Clock::TimePoint pollingSince_{};
  std::mutex keepAliveMutex_;  // guards creating keepAlive_
  std::unique_ptr<internal::KeepAlive> keepAlive_;

  enum State { kNew, kReady, kDestroyed };
  std::atomic<int> state_{kNew};
  std::atomic<bool> waitsStopped_{false};
};

}  // namespace dlm
