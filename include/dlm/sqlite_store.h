// The SQLite store: the embedded default (one host; threads and processes
// sharing one database file).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dlm/export.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"

struct sqlite3;

namespace dlm {

// Carries an application's open SQLite transaction into commitLock:
//   sqlite3_exec(db, "BEGIN IMMEDIATE", ...);
//   ... the application's writes ...
//   manager.commitLock(lock, dlm::SqliteTransaction(db));
//   sqlite3_exec(db, "COMMIT", ...);
// `db` must be a connection to the manager's SqliteStore file (any path
// spelling: files are compared after resolving links) with a transaction
// open; otherwise commitLock throws INVALID_ARGUMENT and changes nothing. The
// release is an UPDATE run on `db`, so it commits or rolls back with the
// application's work. Prefer BEGIN IMMEDIATE: in a deferred transaction that
// has only read, the UPDATE may fail with RETRIES_EXHAUSTED (SQLITE_BUSY)
// when another connection wrote since, and only a new transaction helps. If
// the lock was taken over after expiry (or force-released), commitLock rolls
// that transaction back (so the COMMIT fails with "no transaction is
// active") and throws LOCK_NOT_HELD. While the application's transaction
// holds the file's write lock (from BEGIN IMMEDIATE or its first write on),
// every other dlm write on the file waits for it (any thread or process, this
// thread's own acquireLock/releaseLock included) and fails with
// RETRIES_EXHAUSTED after busyTimeout (or at its call's deadline, if
// earlier): commit soon after commitLock. The UPDATE itself runs on `db`, so
// any wait of it for the write lock follows the application's own busy
// handler, not busyTimeout.
//
// guardWithin takes the same adapter and checks the hold with a SELECT on
// `db` (no write). Under BEGIN IMMEDIATE the application's transaction holds
// the file's write lock, so no takeover can commit until it ends (takeovers
// wait busyTimeout, then fail with RETRIES_EXHAUSTED). In a deferred
// transaction that has not written yet, a takeover may commit after the
// guard; the application's next write then fails with SQLITE_BUSY (its
// snapshot is older than the takeover), so the database refuses it all the
// same. If the hold is gone or its lease has ended, guardWithin rolls the
// transaction back and throws LOCK_NOT_HELD, as commitLock does.
class DLM_API SqliteTransaction final : public AppTransaction {
 public:
  explicit SqliteTransaction(sqlite3* db) : db_(db) {}
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_;
};

struct DLM_API SqliteStoreOptions {
  // Path of the database file; created if missing (by the first call other
  // than schemaState, which never creates it). initialize() creates dlm's
  // tables in a file that has none (a new file, or the application's own
  // database), in one transaction, with or without applyMigrations: the
  // embedded store needs no migration step. An older dlm schema is migrated
  // only with applyMigrations or `dlmctl migrate`.
  // An initialize() that created the file and failed before making any
  // table removes it again. ":memory:" works for one store object only (no
  // other connection can see it).
  std::string path = "dlm.sqlite";
  // The longest one wait for the database write lock (held by another
  // connection or process), or for this store's connection (held by another
  // thread of this process), may last before the call fails with
  // RETRIES_EXHAUSTED (transient). A wait also ends at the calling thread's
  // deadline (dlm/deadline.h; the manager sets operationTimeout) when that
  // comes first. A call made with no deadline set gets busyTimeout for all
  // its waits together.
  std::chrono::milliseconds busyTimeout{std::chrono::seconds(5)};
  // Wake waiters in other processes on the same file when a lock is freed
  // (through the "<file>-dlmwake" wake file, watched with inotify; see the
  // class comment). false: this store neither signals nor watches, and its
  // waiters hear other processes' releases only by polling.
  bool wakeOtherProcesses = true;
};

// Thread-safe: one connection guarded by a mutex. Every write runs in a
// BEGIN IMMEDIATE transaction (the file's write lock takes the place of
// SELECT ... FOR UPDATE); the file is in WAL mode. Expiry is judged by this
// process's wall clock (std::chrono::system_clock).
//
// Time: a call waits for the connection (another thread's call in progress)
// and for the file's write lock (another writer's transaction) until the
// calling thread's deadline or busyTimeout, whichever comes first, then
// throws RETRIES_EXHAUSTED (transient) saying what it waited for and which
// bound ended the wait. Reads (describe, listHeld, listWaiters,
// schemaState) do not wait for writers. schemaState on a file opens a
// query-only connection of its own for the call, without creating the file
// (the store's connection would create it and switch it to WAL); a missing
// file is present == false.
// Not bounded by the deadline: the COMMIT's fsync (synchronous=FULL for
// acquisitions) and SQLite's own short internal retries on the WAL index.
// A process killed at any point (inside a transaction too) leaves the file
// consistent: the kernel drops its file locks and SQLite ignores its
// uncommitted WAL frames; a lock it held frees at its TTL.
// close() refuses new calls at once and then waits for the call in progress,
// which is itself bounded as above.
//
// Release notifications (subscribeReleases, which always returns true):
// release, forceRelease and commitLock on any SqliteStore object in this
// process on the same file (the same canonical path) are delivered to the
// listeners subscribed on every such object, on the releasing thread, before
// the call returns. Releases by other processes on the same host are
// delivered too (with wakeOtherProcesses, the default) as missedReleases()
// (no key: every waiter on the file tries again), on a watcher thread of this
// process (one per file, started by the first subscribe, stopped by the last
// unsubscribe or close): each release pwrites 8 bytes to
// "<canonical file path>-dlmwake", which the watchers follow with inotify.
// The wake file is created by the first subscribe (a waiting manager, never a
// read-only call), with the database file's permission bits (and owner, when
// created by root); a release never creates it. When it cannot be created,
// written or watched (or on a system without inotify), other processes'
// waiters notice by polling (sleepBetweenRetries), as they always may: a
// failure to signal never fails a release. A forked child does not inherit
// a working watcher; its first subscribe starts its own. A ":memory:" store
// only hears its own releases. commitLock announces at
// once, before the application commits (SQLite cannot say when it does): a
// woken waiter's attempt waits for the application's transaction to end (the
// write lock) and then sees the row free if it committed; if it rolled back,
// the lock is still held and waiters find out at their next poll. A store
// destroyed with listeners still subscribed drops them.
//
// registerWait runs under BEGIN IMMEDIATE, which serialises it with every
// other registration on the file, across processes. unregisterWait wakes
// (as a release does) when the request it deletes may have held back other
// waiters (fair queueing).
//
// Lock modes (schema version 4): a SHARED hold is a row of its own in table
// dlm_shared_holds; the key's row in dlm_locks keeps its EXCLUSIVE state and
// the fencing counter that acquisitions of both modes advance. tryAcquire
// checks holds, then the queue of request rows, then grants, all in one
// BEGIN IMMEDIATE transaction, so queue order is judged atomically with the
// grant here. A file at version 4 refuses libraries built for version 3
// (compatible_from 4): they would not see SHARED holds.
//
// purgeIdle runs one BEGIN IMMEDIATE transaction per batch (idleness judged
// by the application's clock); the fencing floor it raises lives in the file
// (table dlm_fencing_floor) and a trigger makes every new row start at it,
// so rows created by any writer of the file, older libraries included, keep
// their tokens above the purged ones. A dry run takes no write lock and
// reports the floor unchanged. SQLite has no roles: whoever can write the
// file can purge, and there are no client bindings (listClients,
// bindClient and unbindClient throw INVALID_ARGUMENT, LockStoreAdmin's
// defaults).
// Both sides of the store interface: LockStore (the protocol) and
// LockStoreAdmin (inspection and admin; admin() answers this store).
class DLM_API SqliteStore final : public LockStore, public LockStoreAdmin {
 public:
  // Opens no connection yet; the first call (usually initialize) does.
  explicit SqliteStore(SqliteStoreOptions options);
  ~SqliteStore() override;

  std::string_view name() const override;
  LockStoreAdmin* admin() override { return this; }
  void initialize(bool applyMigrations) override;
  void close() override;
  AcquireResult tryAcquire(const AcquireRequest& request) override;
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override;
  void commitLock(AppTransaction& tx, const StoreKey& key,
                  std::string_view token, LockMode mode) override;
  void guardWithin(AppTransaction& tx, const StoreKey& key,
                   std::string_view token, LockMode mode) override;
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override;
  // The batch calls (see LockStore): one BEGIN IMMEDIATE transaction per
  // batch, so one wait for the file's write lock and one COMMIT (one fsync
  // for acquisitions and extensions; releases commit lazily, as release
  // does). Each lock runs in key order under a savepoint of its own and is
  // answered exactly as the single call would answer it, in the requests'
  // order. A lock over a cap of dlm_limits gets its INVALID_ARGUMENT in its
  // outcome, with nothing written for it, and the others go on. Any other
  // failure (RETRIES_EXHAUSTED when the write lock stays taken past the
  // thread's deadline or busyTimeout, as for the single calls; the file
  // lost; I/O) is thrown and commits nothing. releaseEach wakes the waiters
  // of every key it freed after the COMMIT, as release does (the wake file
  // once for the batch).
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override;
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override;
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override;
  // One BEGIN IMMEDIATE transaction, keys in key order: COMMIT when every
  // lock is granted; otherwise ROLLBACK, so no other connection ever sees a
  // part of the batch held, and the answer names what blocked the first
  // lock refused (in key order), or the error of a lock is thrown.
  AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests) override;
  std::optional<LockRecord> describe(std::string_view key) override;
  std::vector<LockRecord> holdersOf(std::string_view key) override;
  std::vector<LockRecord> listHeld(std::string_view keyPrefix) override;
  std::vector<WaitRecord> listWaiters(std::string_view keyPrefix) override;
  SchemaState schemaState() override;
  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) override;
  bool forceRelease(std::string_view key) override;
  // Deletes the request rows; owners are matched as stored (SQLite shows
  // them as they are).
  int cancelRequests(std::string_view key,
                     std::optional<std::string_view> owner) override;
  StoreTime now() override;
  WaitRegistration registerWait(const WaitRequest& request) override;
  void unregisterWait(std::string_view key, std::string_view owner) override;
  bool subscribeReleases(ReleaseListener* listener) override;
  void unsubscribeReleases(ReleaseListener* listener) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlm
