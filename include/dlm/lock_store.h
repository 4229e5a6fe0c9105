// The store interface, protocol side: what a lock manager calls on a store
// to take, keep and free locks.
//
// For those who write a store (or a decorator of one, see
// dlm/lock_store_wrapper.h) and for tools that drive a store directly.
// Application programs need not include this file: dlm/dlm.h and the store
// headers (dlm/postgres_store.h, dlm/sqlite_store.h) give them all they use.
// The inspection and admin calls (describe, holdersOf, listHeld,
// listWaiters, schemaState, purgeIdle, forceRelease) are a second interface,
// LockStoreAdmin (dlm/lock_store_admin.h), reached through admin().
//
// Evolution rule: a call added to LockStore or LockStoreAdmin after a
// release comes with a default implementation (a neutral answer, or
// throwing DLMException INTERNAL_ERROR naming the call), so that stores
// written outside this project keep compiling; CHANGELOG.md lists every
// change a store writer has to make.
//
// A store talks to one database. It holds no policy: no retries, no waiting,
// no threads. The manager builds keys, validates input, retries transient
// failures and waits; the store runs each operation as one short transaction.
//
// Concurrency contract: every method may be called from many threads at once;
// a store guards its own connections (a pqxx connection or a sqlite3 handle is
// used by one thread at a time). Several processes may use stores on the same
// database at once; correctness never depends on them sharing memory. The one
// thread a store may run is the one that delivers release notifications
// (subscribeReleases).
//
// Time: every method returns (or throws a transient CONNECTION_ERROR, or
// RETRIES_EXHAUSTED for a wait on a lock of the database itself, such as
// SQLite's write lock) by the calling thread's deadline (dlm/deadline.h);
// without one, by the store's own default bound. A store never blocks its
// caller longer, but for commitLock and guardWithin, which run on the
// application's transaction.
//
// Errors: every method throws only DLMException. Failures that may succeed when
// retried (connection lost, serialization failure, SQLITE_BUSY) carry
// transient() == true. "Held by someone else" is not an error: it is
// AcquireResult::acquired == false. A store never writes to stdout or stderr:
// what it has to say outside a call's result goes to its warning listeners.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/app_transaction.h"
#include "dlm/error.h"
#include "dlm/export.h"
#include "dlm/lock_mode.h"
#include "dlm/lock_record.h"
#include "dlm/store_key.h"

namespace dlm {

class LockStoreAdmin;

struct DLM_API AcquireRequest {
  const StoreKey& key;
  // The owner GUID recorded on the row.
  std::string_view owner;
  // Random, unique per acquisition. Release and extend are conditional on it.
  // Acquiring again with the token that already holds the row succeeds and
  // changes nothing, so a retry after a lost reply is safe.
  std::string_view token;
  std::chrono::milliseconds ttl;
  const Holder& holder;
  // SHARED: a hold of its own beside other SHARED holders (see lock_mode.h).
  LockMode mode = LockMode::EXCLUSIVE;
};

struct DLM_API AcquireResult {
  bool acquired = false;
  // Set when acquired: grows with every acquisition of the key; the first
  // acquisition of a key gets 1, or one more than the fencing floor once a
  // purge deleted rows (both stores keep one), so it never goes back.
  std::int64_t fencingToken = 0;
  StoreTime acquiredAt;
  StoreTime expiresAt;
  // When not acquired: the key whose holder blocks this one (the key itself,
  // an ancestor or a descendant).
  std::string blockedBy;
  // When not acquired and no live hold is in the way, but an older live
  // request of another owner that conflicts with this one waits (fair
  // queueing): it goes first. blockedBy is then the key that request waits
  // for.
  bool queued = false;
};

// How long a request row counts without being registered again: a waiting
// manager registers its request again every kRequestLease / 2, so a crashed
// waiter's (or a forged) row stops counting within kRequestLease. The
// PostgreSQL schema caps every request at this (schema version 7).
inline constexpr std::chrono::milliseconds kRequestLease{10000};

// A waiter about to wait (or renewing its wait): the request row it records.
// Registering again keeps the row's place in the queue while its lease has
// not ended.
struct DLM_API WaitRequest {
  const StoreKey& key;
  // The waiting owner (the thread's GUID).
  std::string_view owner;
  // The request is ignored by others, and may be deleted, this long after it
  // was recorded (at most kRequestLease, and not past the waiter's
  // deadline), so a crashed waiter's row does not linger in the wait-for
  // graph.
  std::chrono::milliseconds maxWait;
  // The mode the waiter asks for: which holds and requests it conflicts with.
  LockMode mode = LockMode::EXCLUSIVE;
  // How long from now the waiter waits at most: the time to its own
  // deadline (the end of acquireLock's timeout), whole, not capped like
  // maxWait. Stores record it for the listings (WaitRecord::deadline) and
  // nothing else; nullopt: the waiter has no deadline (or does not say).
  // Stores record none for more than 100 years.
  std::optional<std::chrono::milliseconds> untilDeadline = std::nullopt;
};

struct DLM_API WaitRegistration {
  // Empty when the request row was recorded. Otherwise waiting would close a
  // cycle in the wait-for graph and nothing was recorded: the keys along the
  // cycle, starting with the requested key; each next key is one that the
  // holder of the previous one waits for, and the caller holds a lock that
  // blocks the last one (itself, an ancestor or a descendant).
  std::vector<std::string> deadlockCycle;
};

// One lock's answer in a batch call (LockStore::tryAcquireEach,
// releaseEach, extendEach): its own result, or the error of this lock alone
// (tenancy, a limit, a key of no client; or transient: this lock's call was
// cut off and its outcome is unknown). A failure of the whole call (no
// lock's outcome is known) is thrown instead.
struct DLM_API AcquireOutcome {
  AcquireResult result;
  std::optional<DLMException> error;
};

struct DLM_API ReleaseRequest {
  const StoreKey& key;
  std::string_view token;
  LockMode mode = LockMode::EXCLUSIVE;
};

struct DLM_API ReleaseOutcome {
  bool released = false;  // as release() answers
  std::optional<DLMException> error;
};

struct DLM_API ExtendRequest {
  std::string_view key;
  std::string_view token;
  std::chrono::milliseconds ttl;
  LockMode mode = LockMode::EXCLUSIVE;
};

struct DLM_API ExtendOutcome {
  std::optional<StoreTime> expiresAt;  // nullopt: the lock was lost
  std::optional<DLMException> error;
};

// tryAcquireAll's answer: every lock taken (results, one per request, in the
// requests' order) or none; when none, what blocked the first lock refused.
struct DLM_API AcquireAllResult {
  bool acquired = false;
  std::vector<AcquireResult> results;
  std::string blockedBy;
  bool queued = false;
};

// Receives the keys of released locks from a store (subscribeReleases).
class DLM_API ReleaseListener {
 public:
  virtual ~ReleaseListener() = default;
  // `key` may have been unblocked by a release (or a commitLock that
  // committed): the freed key itself, or (PostgreSQL, whose notifications
  // carry no key) a key that a wait registered through this store waits
  // for and that the freed key is, is above or is below. Called on the
  // store's thread; must return quickly and must not call the store.
  virtual void released(std::string_view key) = 0;
  // Releases may have gone unseen (the store's listening connection was
  // lost and re-opened): every waiter should look again.
  virtual void missedReleases() = 0;
};

// Receives what a store has to tell the managers using it outside any call's
// result: conditions that fail nothing but that an operator should hear of
// (PostgreSQL: acquires that do not wait for a standby, under
// SynchronousReplication::WARN; the server's notice that the call bound a
// clientId at first use to the login's role, SQLSTATE DL001, schema 17).
// Managers report each one as a STORE_WARNING event.
class DLM_API StoreWarningListener {
 public:
  virtual ~StoreWarningListener() = default;
  // Called on the thread of the store call that noticed (e.g. initialize,
  // the tryAcquire that bound a clientId), at the end of that call, never
  // while the store holds a lock or a connection of its own; must return
  // quickly and must not call the store.
  virtual void storeWarning(std::string_view message) = 0;
};

class DLM_API LockStore {
 public:
  LockStore() = default;
  LockStore(const LockStore&) = delete;
  LockStore& operator=(const LockStore&) = delete;
  virtual ~LockStore() = default;

  // A short name for messages: "postgres", "sqlite".
  virtual std::string_view name() const = 0;

  // The store's inspection and admin side (dlm/lock_store_admin.h), or
  // nullptr when it has none; callers needing it use adminOf(store), which
  // throws INVALID_ARGUMENT then. PostgresStore and SqliteStore have one
  // (themselves). A store with none still serves every lock call; only
  // DistributedLockManager::describeLock/describeHolders and dlmctl's
  // inspection and admin commands need it.
  virtual LockStoreAdmin* admin() { return nullptr; }
  // Checks that the database has the schema version this library needs.
  // With applyMigrations, first applies the missing migrations (each in one
  // transaction); SqliteStore creates its schema in a file that has none
  // without being asked. Throws SCHEMA_MISMATCH naming what to apply, or
  // TABLE_CREATION_ERROR when applying failed, or CONNECTION_ERROR.
  virtual void initialize(bool applyMigrations) = 0;

  // Closes every connection. Further calls throw INTERNAL_ERROR.
  virtual void close() = 0;

  // One attempt to take the lock, in one transaction: the hierarchy protocol
  // of docs/design.md ("The row protocol"), expiry judged by the
  // store's clock. Refused when a live hold conflicts (request.mode against
  // each hold's mode, on the key, an ancestor or a descendant), or when a
  // live request row of another owner that conflicts with this attempt is
  // older than request.owner's own request row for the key (older than any,
  // when the owner has none): AcquireResult::queued. Every acquisition, of
  // either mode, takes the key's next fencing token. An EXCLUSIVE
  // acquisition takes the key over from expired holders of either mode; a
  // SHARED one from an expired EXCLUSIVE holder. INVALID_ARGUMENT, with
  // nothing written, over one of the store's caps (dlm_limits: TTL, key
  // bytes, keys per call, live SHARED holders per key); a retry of the token
  // that holds is answered as held all the same.
  virtual AcquireResult tryAcquire(const AcquireRequest& request) = 0;

  // Frees the hold `token` took in `mode` if it still has it (even if
  // expired but not taken over). True when freed (EXCLUSIVE: or already
  // freed by this token); false when another acquisition took the key over
  // since (SHARED: also when this token's hold was already released, since a
  // released SHARED hold leaves nothing behind). Wakes the waiters it may
  // have blocked when it frees.
  virtual bool release(const StoreKey& key, std::string_view token,
                       LockMode mode) = 0;

  // Frees the hold inside the application's open transaction `tx` (an adapter
  // of this store's kind: PostgresTransaction, SqliteTransaction), so the
  // release is visible only if that transaction commits. When `token` no
  // longer holds the row (expired and taken over), throws LOCK_NOT_HELD and
  // leaves `tx` unable to commit, so work done without the lock is not
  // committed. INVALID_ARGUMENT when `tx` belongs to another kind of store
  // or has no open transaction.
  // The store side of DistributedLockManager::commitLock.
  virtual void commitLock(AppTransaction& tx, const StoreKey& key,
                          std::string_view token, LockMode mode) = 0;

  // Inside the application's open transaction `tx` (an adapter of this
  // store's kind), checks that `token` holds `key` in `mode` with a lease
  // that has not expired, and keeps that hold from being taken over until
  // `tx` ends. The hold itself is left as it is: it stays held after `tx`
  // commits or rolls back. PostgreSQL: a row lock on the hold's row
  // (dlm_guard_within: FOR SHARE on the key's row for EXCLUSIVE, FOR KEY
  // SHARE on the hold's own row for SHARED), which other guards of the hold
  // and SHARED co-holders pass, and every takeover of the hold waits for
  // (rowLockWait, then LOCK_UNAVAILABLE); so do an EXCLUSIVE holder's own
  // extend and release. SQLite: a read of the hold in `tx`;
  // the file's write lock (BEGIN IMMEDIATE) keeps every takeover waiting,
  // and in a transaction that has not written yet, a takeover that commits
  // first makes its first write fail (SQLITE_BUSY). When `token` no longer
  // holds an unexpired lease, throws LOCK_NOT_HELD and leaves `tx` unable to
  // commit. INVALID_ARGUMENT as commitLock.
  // The store side of DistributedLockManager::guardWithin.
  virtual void guardWithin(AppTransaction& tx, const StoreKey& key,
                           std::string_view token, LockMode mode) = 0;

  // Sets the hold's expiry to now + ttl if `token` still holds the key in
  // `mode` (even if expired but not taken over). The new expiry, or nullopt
  // when the lock was lost. INVALID_ARGUMENT when ttl is over the store's
  // cap (dlm_limits.max_ttl_ms). PERMISSION_DENIED (PostgreSQL, schema
  // version 17 on) when the key's clientId is bound to a role the store's
  // login is not a member of (an admin rebound it, e.g. after purgeClient).
  virtual std::optional<StoreTime> extend(std::string_view key,
                                          std::string_view token,
                                          std::chrono::milliseconds ttl,
                                          LockMode mode) = 0;

  // Batch calls (schema version 19 on PostgreSQL): the work of
  // several calls of one kind, each lock with its own outcome, in the
  // requests' order, exactly as the single call would answer it (same
  // rules, same limits, same checks of tenancy; an error refuses only its
  // own lock). A store does the batch in one transaction where it can
  // (PostgreSQL: set-based statements over arrays, row locks in key order,
  // a row locked by someone else's transaction leaving the batch for the
  // single call; SQLite: one BEGIN IMMEDIATE). A throw means no outcome is
  // known for any lock (a lost connection: each may or may not have run).
  // No two requests of one batch name the same key with the same token.
  // The defaults make the single calls one by one, so a store (or a
  // decorator that overrides a single call) may leave them alone.
  virtual std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests);
  virtual std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests);
  virtual std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests);

  // Takes every lock of `requests` (distinct keys) or none, in one
  // transaction where the store can, keys taken in key order; each with
  // its own mode, TTL, token and fencing token, exactly as tryAcquire
  // would. An error of any lock refuses all of them and is thrown. The
  // default takes them one by one with tryAcquire in key order and, when
  // one is refused or fails, releases those it took (by token) before it
  // answers: all or none in effect, though another reader may see a part
  // held for a moment.
  virtual AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests);

  // Follows the wait-for graph from request.key (a request -> owners of
  // live holds that conflict with it, and owners of older live requests
  // that conflict with it (fair queueing) -> the requests of those owners
  // -> ...; modes as in lock_mode.h; expired holds and requests ignored; a
  // request that its own owner's hold blocks is not followed) and, unless it
  // leads back to request.owner, records the request row (replacing one the
  // owner had for the key, keeping its age). Of two registrations that close
  // a cycle together, exactly one is told (SQLite: one write transaction,
  // serialised with every other; PostgreSQL: a second walk after the
  // registration commits, docs/design.md). INVALID_ARGUMENT when the owner already
  // has the store's cap of live requests for other keys
  // (dlm_limits.max_requests_per_owner).
  virtual WaitRegistration registerWait(const WaitRequest& request) = 0;

  // Deletes `owner`'s request row for `key`, if any, and wakes the waiters
  // it may have held back (live requests of other owners that conflict with
  // it), since they may now go first.
  virtual void unregisterWait(std::string_view key, std::string_view owner) = 0;

  // Starts delivering the keys this database frees to `listener` (which must
  // stay alive until unsubscribeReleases returns) and returns true once
  // delivery is active, so a release committed after the call returns is
  // delivered. False when the store cannot tell (waiters then poll). May
  // open a connection and start a thread.
  virtual bool subscribeReleases(ReleaseListener* listener) {
    (void)listener;
    return false;
  }
  // Stops delivery to `listener`; no call to it is running or made after
  // this returns.
  virtual void unsubscribeReleases(ReleaseListener* listener) {
    (void)listener;
  }

  // How many times the store has replaced a connection that died (a server
  // restart, a terminated backend, a failover) with a new one that works,
  // pooled and listening connections alike. Only grows. Managers report an
  // increase as a STORE_RECONNECTED event. A store without connections to
  // lose (SQLite) answers 0.
  virtual std::uint64_t reconnections() const { return 0; }

  // The store's clock: the database clock on PostgreSQL, the application
  // clock on SQLite.
  virtual StoreTime now() = 0;

  // A manager that uses this store names its clientId, so that operators
  // can tell its connections apart (PostgreSQL: in application_name of the
  // connections opened afterwards). No I/O; never throws.
  virtual void addClient(std::string_view clientId) noexcept { (void)clientId; }

  // How the listings (LockStoreAdmin) show `owner`: the owner itself, or
  // (PostgreSQL, schema version 7 on) a digest of it, which cannot be sent
  // back to act as that owner. Lets a caller recognise its own rows. No I/O.
  virtual std::string listedOwner(std::string_view owner) const {
    return std::string(owner);
  }

  // Adds / removes a receiver of this store's warnings (see
  // StoreWarningListener); `listener` must stay alive until removed. A
  // manager adds itself when built and removes itself when destroyed. No
  // I/O; never throws. A store that never warns keeps the defaults.
  virtual void addWarningListener(StoreWarningListener* listener) noexcept {
    (void)listener;
  }
  virtual void removeWarningListener(StoreWarningListener* listener) noexcept {
    (void)listener;
  }
};

}  // namespace dlm
