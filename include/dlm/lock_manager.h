// The lock manager: the API applications use.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dlm/clock.h"
#include "dlm/error.h"
#include "dlm/export.h"
#include "dlm/lock.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_events.h"
#include "dlm/lock_guard.h"
#include "dlm/lock_metrics.h"
#include "dlm/lock_record.h"

namespace dlm {

class LockStore;  // dlm/lock_store.h
// Thread-safe; share one manager between threads (each thread uses its own
// Lock objects). Build with DistributedLockManager::builder().
class DLM_API DistributedLockManager {
 public:
  class Builder;
  static Builder builder();

  DistributedLockManager(const DistributedLockManager&) = delete;
  DistributedLockManager& operator=(const DistributedLockManager&) = delete;
  ~DistributedLockManager();

  // Time bounds: every call below that touches the store returns within
  // the configuration's operationTimeout (acquireLock: its timeout +
  // operationTimeout), connecting, retries and pauses included; a store
  // that does not answer in time gives CONNECTION_ERROR (SQLite, waiting
  // for its file's write lock: RETRIES_EXHAUSTED). See docs/guide.md for
  // the small overrun allowed on top. Not bounded by it: initialize() with
  // applyMigrations on PostgreSQL (each migration step gets at least 60 s,
  // postgres_store.h), and commitLock and guardWithin, which run on the
  // application's own transaction and wait as its statements do.

  // Checks the store's schema version (and applies migrations first when the
  // builder opted in; a SQLite file without dlm's tables gets them in any
  // case). Must succeed before any lock call.
  // Throws SCHEMA_MISMATCH (naming the migration to apply),
  // TABLE_CREATION_ERROR, CONNECTION_ERROR.
  void initialize();

  // Wakes every acquireLock waiting in this manager (they throw
  // INTERNAL_ERROR "destroyed"), stops keep-alive renewals and closes the
  // store's connections unless another manager that was built on the same
  // store and not yet destroyed still uses it (the last one closes it).
  // Locks still held are not released; they expire after their TTL. Later
  // lock calls throw INTERNAL_ERROR.
  void destroy();

  // The first step of a graceful shutdown (a SIGTERM, an operator's Ctrl-C
  // during a wait): every acquireLock of this manager that is waiting gives
  // up at once, and every later acquireLock makes one attempt only, as
  // tryAcquireLock does; both throw LOCK_UNAVAILABLE naming the stop when
  // the lock is not had. Nothing else changes: held locks stay held and can
  // be released, extended and kept alive. Safe from any thread; cannot be
  // undone. A waiter whose last attempt succeeded just before the stop
  // returns holding the lock, so a caller that stops must release what its
  // acquireLock calls returned.
  void stopWaiting();

  // A handle for `id` at `level`. No I/O. The id is a path whose segments are
  // separated by the builder's separator ('.' by default): holding "a.b"
  // blocks "a", "a.b" and "a.b.*", not "a.c". Throws INVALID_ARGUMENT for an
  // empty id, one over 1,024 bytes, a NUL byte, invalid UTF-8, an empty path
  // segment (".a", "a..b", "a."), or a DC lock of a manager built with an
  // empty farmId. `level`: DC unless given (kDefaultLockLevel). `mode`:
  // see dlm/lock_mode.h (SHARED holders of a key coexist; docs/guide.md
  // "Shared locks and fair queueing").
  Lock getLockInstance(const std::string& id,
                       LockLevel level = kDefaultLockLevel,
                       LockMode mode = LockMode::EXCLUSIVE) const;

  // One attempt. Returns when held; throws LOCK_UNAVAILABLE when someone else
  // holds the key, an ancestor or a descendant in a conflicting mode, when an
  // older waiter's request that conflicts is queued (fair queueing: the
  // message says "queued"), or when `lock` is already acquired (not
  // re-entrant: it stays held). INVALID_ARGUMENT for a ttl <= 0
  // or over 365 days, or a Lock of another manager (or a moved-from one);
  // CONNECTION_ERROR / RETRIES_EXHAUSTED when the store stays unreachable
  // through the configured store retries. The default ttl is lockTtl.
  void tryAcquireLock(Lock& lock);
  void tryAcquireLock(Lock& lock, std::chrono::milliseconds ttl);

  // Attempts until held or until `timeout` (default waitForLock) has passed
  // (and returns or throws by timeout + operationTimeout):
  // sleeps min(sleepBetweenRetries, time left) between attempts (shortened by
  // the configured jitter) and makes a last attempt at the deadline; a
  // timeout of 0 is exactly one attempt. Before the first sleep it records a
  // request row (removed when the call returns, whatever the outcome) and
  // follows the wait-for graph: if the lock's holder waits, directly or
  // through others, for a lock held under the calling thread's owner (see
  // owner.h), it throws DEADLOCK_DETECTED at once, naming the cycle. A
  // release of the awaited lock (or of the ancestor or descendant blocking
  // it) ends the sleep at once when the store announces releases
  // (PostgreSQL: LISTEN/NOTIFY, any process; SQLite: a wake file, any
  // process on the host);
  // otherwise, and always for expiry, the next attempt comes after the sleep.
  // Throws LOCK_UNAVAILABLE on timeout; every other error at once.
  // INVALID_ARGUMENT for a negative timeout.
  //
  // When the outcome of an attempt is unknown (the store stopped answering
  // after the request was sent: CONNECTION_ERROR / RETRIES_EXHAUSTED), the
  // acquisition may have been committed. The manager keeps its token and
  // releases it in the background as soon as the store answers again, so
  // the key is free within about operationTimeout of the store coming back,
  // not after the TTL. A key blocked by such a leftover of the calling
  // thread's own owner (or by a release of its own that a server crash
  // undid) is released by token on the next attempt, not reported as a
  // deadlock. A waiter records its request row again after the store
  // reports that announcements may have been missed (reconnection).
  void acquireLock(Lock& lock);
  void acquireLock(Lock& lock, std::chrono::milliseconds ttl);
  void acquireLock(Lock& lock, std::chrono::milliseconds ttl,
                   std::chrono::milliseconds timeout);

  // Several locks at once, all or none (the guide's "Several locks at
  // once"): takes every lock of `locks` (handles of this manager, none
  // acquired, no two naming the same key) in one store transaction, keys in
  // key order, each with its own mode and fencing token and the same ttl
  // (default lockTtl); or takes none and throws LOCK_UNAVAILABLE naming the
  // key in the way. Errors as tryAcquireLock; an error of any lock (e.g.
  // PERMISSION_DENIED) refuses all of them. INVALID_ARGUMENT for an empty
  // list, a null or acquired handle, or two handles of one key. Each lock
  // is released on its own (releaseLock) or together (releaseAll).
  void tryAcquireAll(const std::vector<Lock*>& locks);
  void tryAcquireAll(const std::vector<Lock*>& locks,
                     std::chrono::milliseconds ttl);
  // Attempts tryAcquireAll until it succeeds or `timeout` (default
  // waitForLock) has passed: sleeps min(sleepBetweenRetries, time left)
  // between attempts and makes a last attempt at the deadline (0: one
  // attempt); returns or throws by timeout + operationTimeout. It holds
  // nothing while it waits, so it records no request row and takes no place
  // in the queue (no deadlock can involve it; a single-key waiter that keeps
  // coming back can keep it waiting until its timeout). Throws
  // LOCK_UNAVAILABLE on timeout.
  void acquireAll(const std::vector<Lock*>& locks);
  void acquireAll(const std::vector<Lock*>& locks,
                  std::chrono::milliseconds ttl);
  void acquireAll(const std::vector<Lock*>& locks,
                  std::chrono::milliseconds ttl,
                  std::chrono::milliseconds timeout);
  // releaseLock of each handle, in one store call: how many were held by
  // their handle and freed (see releaseLock). Handles that hold nothing are
  // skipped. Throws CONNECTION_ERROR / RETRIES_EXHAUSTED as releaseLock;
  // then every handle still holds.
  std::size_t releaseAll(const std::vector<Lock*>& locks);

  // True when `lock` was held by this handle and the store freed it; false
  // when the handle held nothing (no store call) or when the lock had expired
  // and someone else took it (their lock is left alone). Either way the handle
  // no longer holds anything afterwards, except when it throws
  // (CONNECTION_ERROR / RETRIES_EXHAUSTED): then it still holds and the call
  // may be repeated. After commitLock(lock, tx), while `tx` is still open:
  // RETRIES_EXHAUSTED at once, without retries (the release waits for a row,
  // on SQLite the write lock, that `tx` keeps until it ends: PostgreSQL
  // rowLockWait, SQLite until the deadline or busyTimeout), saying to end
  // `tx` first; once it committed or rolled back, the call works.
  bool releaseLock(Lock& lock);

  // Releases `lock` inside the application's own open transaction `tx` (a
  // PostgresTransaction or SqliteTransaction adapter from the store header),
  // so the release becomes visible only if that transaction commits.
  // Afterwards lock.isReleasePending(); if the transaction rolls back, call
  // rollbackLock(lock) to free the lock. Throws LOCK_NOT_HELD when the handle
  // holds nothing, or when the lock expired and was taken over: then the
  // application transaction is made unable to commit (PostgreSQL: the
  // statement fails inside it; SQLite: it is rolled back), so work done
  // without the lock is not committed. INVALID_ARGUMENT for an adapter of
  // another store kind or a transaction that is not open; CONNECTION_ERROR
  // when the statement could not run (not retried: the transaction is the
  // application's).
  void commitLock(Lock& lock, AppTransaction& tx);
  // For a temporary adapter: commitLock(lock, PostgresTransaction(tx)).
  void commitLock(Lock& lock, AppTransaction&& tx) { commitLock(lock, tx); }

  // Makes the application's own open transaction `tx` (a PostgresTransaction
  // or SqliteTransaction adapter) depend on holding `lock`: checks, in `tx`,
  // that the lock is still held with a lease that has not expired, and keeps
  // it from being taken over until `tx` commits or rolls back. The lock stays
  // held afterwards (release it after the transaction ends: on PostgreSQL a
  // release, and an EXCLUSIVE lock's renewal, made while the guarded
  // transaction is open waits for it, at most rowLockWait).
  // One statement in `tx`, no commit of its own. A holder paused past its
  // TTL (GC, swap, a stopped VM) whose lock was taken meanwhile then cannot
  // commit: LOCK_NOT_HELD, and `tx` is made unable to commit (as commitLock
  // does). LOCK_NOT_HELD also when the handle holds nothing. The lease keeps
  // running while `tx` is open: a takeover after it ends waits for `tx`
  // (PostgreSQL: rowLockWait, then LOCK_UNAVAILABLE; SQLite: busyTimeout),
  // so keep guarded transactions well inside the TTL. INVALID_ARGUMENT and
  // CONNECTION_ERROR as commitLock.
  void guardWithin(Lock& lock, AppTransaction& tx);
  // For a temporary adapter: guardWithin(lock, PostgresTransaction(tx)).
  void guardWithin(Lock& lock, AppTransaction&& tx) { guardWithin(lock, tx); }

  // Releases `lock` in a new transaction of the library's own: for after the
  // application's transaction failed (following commitLock) or instead of
  // commitLock. Same result and errors as releaseLock; call it after the
  // application's transaction ended (while it is open, RETRIES_EXHAUSTED at
  // once, see releaseLock).
  bool rollbackLock(Lock& lock);

  // Extends the held lock to expire `ttl` from now by the store's clock
  // (default lockTtl) and updates lock.expiresAt(). Throws LOCK_NOT_HELD when
  // the handle holds nothing, or when the lock expired and was taken over
  // (the handle then holds nothing); a lock that expired but was not taken is
  // extended. INVALID_ARGUMENT for a bad ttl; CONNECTION_ERROR /
  // RETRIES_EXHAUSTED as for acquiring.
  void extendLock(Lock& lock);
  void extendLock(Lock& lock, std::chrono::milliseconds ttl);

  // A live (unexpired) hold of `lock`'s key, by anyone: owner (as the store
  // lists it, see listedOwner), holder host and pid as the holder reported
  // them, mode, fencing token, times; the EXCLUSIVE holder, else the
  // oldest SHARED one. nullopt when nobody holds the key. Throws
  // CONNECTION_ERROR / RETRIES_EXHAUSTED.
  std::optional<LockRecord> describeLock(const Lock& lock);
  // Every live hold of `lock`'s key: the EXCLUSIVE holder, or the SHARED
  // holders oldest first. Empty when nobody holds it.
  std::vector<LockRecord> describeHolders(const Lock& lock);
  // How describeLock / describeHolders show `owner` (e.g. lock.owner()):
  // the owner itself, or on PostgreSQL a digest of it, so that what a
  // listing shows cannot be used to act as that owner. No I/O.
  std::string listedOwner(std::string_view owner) const;

  // Runs fn under the lock `id` at `level`: acquireLock with the default
  // ttl and timeout, a LockGuard with keep-alive while fn runs, released on
  // every exit path. fn takes no argument or `const Lock&` (for its fencing
  // token); returns what fn returns. Throws LOCK_UNAVAILABLE when the lock
  // cannot be had in time (DEADLOCK_DETECTED, ... as acquireLock), fn's own
  // exceptions unchanged, and LOCK_NOT_HELD when fn returned normally but the
  // lock had been lost meanwhile (work ran partly unprotected).
  // The overload without a mode takes the lock EXCLUSIVE; with one, in
  // `mode` (SHARED: beside other SHARED holders, see lock_mode.h).
  template <typename Fn>
  decltype(auto) withLock(const std::string& id, LockLevel level, Fn&& fn);
  template <typename Fn>
  decltype(auto) withLock(const std::string& id, LockLevel level, LockMode mode,
                          Fn&& fn);

  // Like withLock with one attempt (tryAcquireLock): when the lock is held
  // elsewhere (or an earlier waiter is queued for it), skips fn and returns
  // false; true when fn ran. EXCLUSIVE unless a mode is given.
  template <typename Fn>
  bool tryWithLock(const std::string& id, LockLevel level, Fn&& fn);
  template <typename Fn>
  bool tryWithLock(const std::string& id, LockLevel level, LockMode mode,
                   Fn&& fn);

  // The counters and latency histograms of this manager so far (see
  // dlm/lock_metrics.h; toPrometheusText renders them). Never blocks.
  LockMetrics metrics() const;

  const std::string& clientId() const;
  const std::string& farmId() const;
  const LockConfiguration& configuration() const;
  LockStore& store();

 private:
  class Impl;  // the state and machinery, defined in the library
  friend class Builder;
  // The guard and the clustered-locking facade keep alive, abandon and
  // report through the implementation.
  friend class LockGuard;
  friend class ClusteredLockService;
  explicit DistributedLockManager(std::unique_ptr<Impl> impl);

  // Runs fn with a LockGuard on `lock` (acquired); see withLock.
  template <typename Fn>
  decltype(auto) runGuarded(Lock lock, Fn&& fn);

  std::unique_ptr<Impl> impl_;
};

class DLM_API DistributedLockManager::Builder {
 public:
  // Required. Non-empty, at most 255 bytes, no '#' or NUL.
  Builder& clientId(std::string clientId);
  // The farm of DC locks (kDefaultFarmId, "default", when not set; XDC
  // keys leave it out). At most 255 bytes, no '#' or NUL; empty: this
  // manager takes XDC locks only.
  Builder& farmId(std::string farmId);
  // Required. Shared: several managers (clients) may use one store; the
  // last of them to be destroyed closes it.
  Builder& store(std::shared_ptr<LockStore> store);
  Builder& configuration(LockConfiguration configuration);
  // The path separator of lock ids ('.' by default): any printable ASCII
  // byte except '#'.
  Builder& separator(char separator);
  // With false, ids are flat names: "a.b" and "a" are unrelated locks.
  Builder& hierarchy(bool enabled);
  // Opt-in: initialize() applies missing migrations instead of only checking
  // (a PostgreSQL database's schema is normally the DBA's: docs/dba.md).
  Builder& applyMigrations(bool apply);
  // For tests: the clock used for waiting (steady clock by default).
  Builder& clock(std::shared_ptr<Clock> clock);
  // Receives the manager's events (dlm/lock_events.h); none by default.
  Builder& events(std::shared_ptr<LockEventHandler> handler);

  // Validates everything above; throws INVALID_ARGUMENT naming the problem.
  std::unique_ptr<DistributedLockManager> build();

 private:
  std::string clientId_;
  std::string farmId_ = kDefaultFarmId;
  std::shared_ptr<LockStore> store_;
  LockConfiguration config_;
  char separator_ = '.';
  bool hierarchy_ = true;
  bool applyMigrations_ = false;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<LockEventHandler> events_;
};

// --- templates ---------------------------------------------------------------

template <typename Fn>
decltype(auto) DistributedLockManager::runGuarded(Lock lock, Fn&& fn) {
  LockGuard guard(*this, std::move(lock));
  auto finish = [&guard] {
    const std::string key = guard.lock().key();
    if (guard.lost() || !guard.release()) {
      throw DLMException(
          ErrorCode::LOCK_NOT_HELD,
          "lock '" + key + "' was lost while the guarded code ran");
    }
  };
  // fn may take the lock (for its fencing token) or nothing.
  auto run = [&]() -> decltype(auto) {
    if constexpr (std::is_invocable_v<Fn, const Lock&>) {
      return std::forward<Fn>(fn)(guard.lock());
    } else {
      return std::forward<Fn>(fn)();
    }
  };
  using Result = decltype(run());
  if constexpr (std::is_void_v<Result>) {
    run();
    finish();
  } else {
    Result result = run();
    finish();
    return result;
  }
}

template <typename Fn>
decltype(auto) DistributedLockManager::withLock(const std::string& id,
                                                LockLevel level, Fn&& fn) {
  return withLock(id, level, LockMode::EXCLUSIVE, std::forward<Fn>(fn));
}

template <typename Fn>
decltype(auto) DistributedLockManager::withLock(const std::string& id,
                                                LockLevel level, LockMode mode,
                                                Fn&& fn) {
  Lock lock = getLockInstance(id, level, mode);
  acquireLock(lock);
  return runGuarded(std::move(lock), std::forward<Fn>(fn));
}

template <typename Fn>
bool DistributedLockManager::tryWithLock(const std::string& id, LockLevel level,
                                         Fn&& fn) {
  return tryWithLock(id, level, LockMode::EXCLUSIVE, std::forward<Fn>(fn));
}

template <typename Fn>
bool DistributedLockManager::tryWithLock(const std::string& id, LockLevel level,
                                         LockMode mode, Fn&& fn) {
  Lock lock = getLockInstance(id, level, mode);
  try {
    tryAcquireLock(lock);
  } catch (const DLMException& e) {
    if (e.code() == ErrorCode::LOCK_UNAVAILABLE) return false;
    throw;
  }
  runGuarded(std::move(lock), std::forward<Fn>(fn));
  return true;
}

}  // namespace dlm
