// The lock manager: the API applications use.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlm/clock.h"
#include "dlm/lock.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_store.h"

namespace dlm {

// Thread-safe; share one manager between threads (each thread uses its own
// Lock objects). Build with DistributedLockManager::builder().
class DistributedLockManager {
 public:
  class Builder;
  static Builder builder();

  DistributedLockManager(const DistributedLockManager&) = delete;
  DistributedLockManager& operator=(const DistributedLockManager&) = delete;
  ~DistributedLockManager();

  // Checks the store's schema version (and applies migrations first when the
  // builder opted in). Must succeed before any lock call.
  // Throws SCHEMA_MISMATCH (naming the migration to apply),
  // TABLE_CREATION_ERROR, CONNECTION_ERROR.
  void initialize();

  // Closes the store's connections. Locks still held are not released; they
  // expire after their TTL. Later lock calls throw INTERNAL_ERROR.
  void destroy();

  // A handle for `id` at `level`. No I/O. The id is a path whose segments are
  // separated by the builder's separator ('.' by default): holding "a.b"
  // blocks "a", "a.b" and "a.b.*", not "a.c". Throws INVALID_ARGUMENT for an
  // empty id, one over 1,024 bytes, a NUL byte, invalid UTF-8, an empty path
  // segment (".a", "a..b", "a."), a DC lock without a farmId, or
  // LockMode::SHARED.
  Lock getLockInstance(const std::string& id, LockLevel level,
                       LockMode mode = LockMode::EXCLUSIVE) const;

  // One attempt. Returns when held; throws LOCK_UNAVAILABLE when someone else
  // holds the key, an ancestor or a descendant, or when `lock` is already
  // acquired (not re-entrant: it stays held). INVALID_ARGUMENT for a ttl <= 0
  // or over 365 days, or a Lock of another manager (or a moved-from one);
  // CONNECTION_ERROR / RETRIES_EXHAUSTED when the store stays unreachable
  // through the configured store retries. The default ttl is lockTtl.
  void tryAcquireLock(Lock& lock);
  void tryAcquireLock(Lock& lock, std::chrono::milliseconds ttl);

  // Attempts until held or until `timeout` (default waitForLock) has passed:
  // sleeps min(sleepBetweenRetries, time left) between attempts and makes a
  // last attempt at the deadline; a timeout of 0 is exactly one attempt.
  // Throws LOCK_UNAVAILABLE on timeout; every other error at once.
  // INVALID_ARGUMENT for a negative timeout.
  void acquireLock(Lock& lock);
  void acquireLock(Lock& lock, std::chrono::milliseconds ttl);
  void acquireLock(Lock& lock, std::chrono::milliseconds ttl,
                   std::chrono::milliseconds timeout);

  // True when `lock` was held by this handle and the store freed it; false
  // when the handle held nothing (no store call) or when the lock had expired
  // and someone else took it (their lock is left alone). Either way the handle
  // no longer holds anything afterwards, except when it throws
  // (CONNECTION_ERROR / RETRIES_EXHAUSTED): then it still holds and the call
  // may be repeated.
  bool releaseLock(Lock& lock);

  const std::string& clientId() const { return clientId_; }
  const std::string& farmId() const { return farmId_; }
  const LockConfiguration& configuration() const { return config_; }
  LockStore& store() { return *store_; }

 private:
  friend class Builder;
  DistributedLockManager() = default;

  void requireInitialized() const;
  void checkOwnLock(const Lock& lock) const;
  template <typename Fn>
  auto withStoreRetries(const Lock& lock, Fn&& fn);
  // One store attempt; on success fills `lock`, else returns the blocking key.
  bool attempt(Lock& lock, std::chrono::milliseconds ttl,
               std::string* blockedBy);

  std::string clientId_;
  std::string farmId_;
  char separator_ = '.';
  bool hierarchy_ = true;
  bool applyMigrations_ = false;
  LockConfiguration config_;
  std::shared_ptr<LockStore> store_;
  std::shared_ptr<Clock> clock_;
  Holder holder_;

  enum State { kNew, kReady, kDestroyed };
  std::atomic<int> state_{kNew};
};

class DistributedLockManager::Builder {
 public:
  // Required. Non-empty, at most 255 bytes, no '#' or NUL.
  Builder& clientId(std::string clientId);
  // Needed for DC locks. At most 255 bytes, no '#' or NUL.
  Builder& farmId(std::string farmId);
  // Required. Shared: several managers (clients) may use one store.
  Builder& store(std::shared_ptr<LockStore> store);
  Builder& configuration(LockConfiguration configuration);
  // The path separator of lock ids ('.' by default): any printable ASCII
  // byte except '#'.
  Builder& separator(char separator);
  // With false, ids are flat names: "a.b" and "a" are unrelated locks.
  Builder& hierarchy(bool enabled);
  // Opt-in: initialize() applies missing migrations instead of only checking.
  Builder& applyMigrations(bool apply);
  // For tests: the clock used for waiting (steady clock by default).
  Builder& clock(std::shared_ptr<Clock> clock);

  // Validates everything above; throws INVALID_ARGUMENT naming the problem.
  std::unique_ptr<DistributedLockManager> build();

 private:
  std::string clientId_;
  std::string farmId_;
  std::shared_ptr<LockStore> store_;
  LockConfiguration config_;
  char separator_ = '.';
  bool hierarchy_ = true;
  bool applyMigrations_ = false;
  std::shared_ptr<Clock> clock_;
};

}  // namespace dlm
