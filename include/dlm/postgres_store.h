// The PostgreSQL store (libpq underneath) and the two adapters that carry
// the application's own transaction into commitLock and guardWithin: one for
// a libpqxx transaction, one for a plain libpq connection. This header
// includes neither library.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "dlm/export.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"
#include "dlm/synchronous_replication.h"

namespace pqxx {
class transaction_base;
}
// libpq's connection handle, declared as <libpq-fe.h> declares it.
typedef struct pg_conn PGconn;

namespace dlm {

// Carries an application's open libpqxx transaction into guardWithin and
// commitLock:
//   pqxx::work tx(conn);
//   manager.guardWithin(lock, dlm::PostgresTransaction(tx));
//   ... the application's writes ...
//   tx.commit();
// The transaction must be on the database (and able to see the schema) of
// the manager's PostgresStore. Borrows `tx` for the adapter's lifetime.
class DLM_API PostgresTransaction final : public AppTransaction {
 public:
  explicit PostgresTransaction(pqxx::transaction_base& tx) : tx_(tx) {}
  pqxx::transaction_base& transaction() const { return tx_; }

 private:
  pqxx::transaction_base& tx_;
};

// Carries an application's open transaction on a plain libpq connection
// into guardWithin and commitLock, for an application that does not use
// libpqxx 6.4: one on libpq itself, or on a driver that exposes its
// PGconn*:
//   PQclear(PQexec(conn, "BEGIN"));
//   manager.guardWithin(lock, dlm::LibpqTransaction(conn));
//   ... the application's writes ...
//   PGresult* r = PQexec(conn, "COMMIT");  // PQcmdStatus(r): "COMMIT"
// Only <libpq-fe.h> and this header are needed to build it, and libdlm and
// libpq to link it (`pkg-config --cflags --libs dlm libpq`): no libpqxx
// header, and no libpqxx library either with a shared libdlm.
//
// `conn` must be on the database (and able to see the schema) of the
// manager's PostgresStore, with a transaction open and idle in it
// (PQtransactionStatus PQTRANS_INTRANS: BEGIN sent and its result read).
// Otherwise the call throws INVALID_ARGUMENT and sends nothing: no
// transaction (PQTRANS_IDLE), a transaction that already failed
// (PQTRANS_INERROR: its COMMIT will roll back), a command still in
// progress (PQTRANS_ACTIVE), pipeline mode, or a null `conn`. A connection
// that is broken (PQstatus CONNECTION_BAD) throws CONNECTION_ERROR.
//
// The call is one statement, sent with PQexecParams: it blocks as libpq
// does, without a bound of dlm's (bound it on the connection, e.g. with
// statement_timeout, lock_timeout or keepalives), even on a connection in
// nonblocking mode. Nothing else is changed on the connection: no setting,
// no prepared statement, every result cleared. A failed statement (the lock
// lost: LOCK_NOT_HELD; others as the store's own calls) leaves the
// transaction failed (PQTRANS_INERROR): any later statement in it fails,
// and its COMMIT rolls back, which libpq reports as success with command
// status "ROLLBACK", not as an error. End it with ROLLBACK.
//
// Borrows `conn` for the adapter's lifetime; the application still owns,
// commits and closes it. One thread at a time per connection, as libpq
// wants.
class DLM_API LibpqTransaction final : public AppTransaction {
 public:
  explicit LibpqTransaction(PGconn* conn) : conn_(conn) {}
  PGconn* connection() const { return conn_; }

 private:
  PGconn* conn_;
};

struct DLM_API PostgresStoreOptions {
  // A libpq connection string or URI ("postgresql://app@db/orders",
  // "host=... dbname=..."); empty means libpq's PG* environment variables.
  // Where it does not set them, the store adds TCP keepalives
  // (keepalives=1, keepalives_idle=10, keepalives_interval=3,
  // keepalives_count=3), tcp_user_timeout=15000 and application_name (see
  // applicationName). Connecting is bounded by the call's deadline;
  // connect_timeout, if set, caps each host's attempt. Several hosts (an HA
  // formation's "postgresql://a,b/db?target_session_attrs=read-write") are
  // tried in order, each within its share of the time left, so a silent
  // first host leaves time for the next. A malformed string makes the
  // constructor throw INVALID_ARGUMENT (password redacted).
  std::string connection;
  // The PostgreSQL schema holding dlm's tables and functions; empty means the
  // role's default search_path.
  std::string schema;
  // The most connections open at once; callers beyond it wait for one.
  std::size_t poolSize = 8;
  // How long a call waits for a free pooled connection before failing with
  // CONNECTION_ERROR (transient); never longer than the call's deadline.
  std::chrono::milliseconds poolWait{std::chrono::seconds(30)};
  // How long a statement waits for a row lock held by another session's
  // open transaction (the session's lock_timeout). tryAcquire then answers
  // not acquired, blocked by the key; other calls fail with a transient
  // RETRIES_EXHAUSTED (SQLSTATE 55P03). Must be positive.
  std::chrono::milliseconds rowLockWait{50};
  // The bound of a call made outside any DeadlineScope (dlm/deadline.h):
  // connecting, waiting for a pooled connection and for the server's
  // answer. Also the sessions' statement_timeout. Must be positive.
  std::chrono::milliseconds operationTimeout{std::chrono::seconds(5)};
  // What DBAs see in pg_stat_activity.application_name: this, then a space
  // and the clientIds of the managers using the store, comma-separated
  // ("dlm clientA,clientB"), for connections opened after a manager
  // announced itself (LockStore::addClient). Cut to 63 bytes; bytes
  // outside printable ASCII become '?'. An application_name in
  // `connection` (or PGAPPNAME) takes precedence.
  std::string applicationName = "dlm";
  // Pooler-safe mode, for `connection` going through a connection pooler in
  // transaction pooling mode (PgBouncer): no named prepared statements and
  // no session settings. Each call sends its settings (search_path,
  // lock_timeout, statement_timeout, plan_cache_mode) in the same
  // transaction as its statement, still one round trip. Releases are heard
  // on `listenConnection` when it is set; otherwise subscribeReleases
  // answers false and waiters poll every sleepBetweenRetries. Migrations
  // (initialize(true), `dlmctl migrate`) must use a direct connection.
  bool poolerSafe = false;
  // Where the store LISTENs for releases: a connection string straight to
  // the server (LISTEN needs a session of its own, which transaction
  // pooling does not give). Empty: `connection`, except in pooler-safe
  // mode, where nothing listens.
  std::string listenConnection;
  // Whether initialize() checks that acquires wait for a synchronous
  // standby (dlm/synchronous_replication.h): it reads the sessions'
  // synchronous_commit and the server's synchronous_standby_names. Checked
  // once, at initialize(): an HA engine may later turn synchronous
  // replication off (pg_auto_failover does while its standby is down, and
  // then does not fail over to that standby until it has caught up).
  SynchronousReplication synchronousReplication =
      SynchronousReplication::NOT_CHECKED;
};

// Thread-safe: a pool of connections, each used by one thread at a time.
//
// Bounded time: every call returns, or throws a transient CONNECTION_ERROR,
// by currentDeadline() (or operationTimeout from its start when no
// DeadlineScope is open), whatever the server does: down, refusing,
// accepting but silent, stalled mid-query, holding a row lock (rowLockWait).
// A connection whose answer did not come in time is closed (its state is
// unknown), never cancelled. One limit: a host name is resolved by the
// system resolver, which libpq calls without a timeout of its own (use
// hostaddr= or a local resolver where that matters).
//
// Recovery: when a pooled connection turns out dead (server restarted,
// backend terminated), every idle connection opened before it is dropped too
// and the call is made again at once on a new connection (store calls are
// safe to repeat: they are conditional on the caller's token), so the first
// call after the server is back succeeds. The listening connection
// reconnects by itself (with growing pauses) and then wakes every waiter
// (missedReleases), since releases in between went unheard.
//
// Two calls are bounded differently: initialize(true) applies migrations
// with at least 60 s per migration step (DDL, waiting for another process
// that migrates), connecting and checking the version within the call's
// deadline as usual; guardWithin and commitLock run on the application's
// own connection (libpqxx or libpq), which blocks as the driver does (bound
// it there, e.g. with statement_timeout, lock_timeout or keepalives in the
// application's conninfo).
//
// Acquire and release are one round trip each (server functions shipped in
// schema/postgres.sql). A release commits with synchronous_commit = off: a
// release lost in a server crash leaves the lock held until its TTL, which is
// safe; acquires always commit durably. Releases are announced with
// NOTIFY dlm_release (only when a request row shows someone waits); one
// listening connection and thread per store delivers them to waiters.
// Both sides of the store interface: LockStore (the protocol) and
// LockStoreAdmin (inspection and admin; admin() answers this store).
class DLM_API PostgresStore final : public LockStore, public LockStoreAdmin {
 public:
  // Opens no connection yet; the first call (usually initialize) does.
  // Throws INVALID_ARGUMENT for a malformed connection string, poolSize 0, a
  // negative poolWait, or a rowLockWait or operationTimeout that is not
  // positive.
  explicit PostgresStore(PostgresStoreOptions options);
  ~PostgresStore() override;

  std::string_view name() const override;
  LockStoreAdmin* admin() override { return this; }
  void addClient(std::string_view clientId) noexcept override;
  // A digest: the schema keeps and shows only digests of owners.
  std::string listedOwner(std::string_view owner) const override;
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
  // Set-based (schema 19): see the batch functions in schema/postgres.sql.
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override;
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override;
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override;
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
  // Client bindings and cancelling waits (schema version 7 on): the
  // functions dlm_list_clients, dlm_bind_client, dlm_unbind_client and
  // dlm_cancel_requests. All but listClients need the admin role
  // (PERMISSION_DENIED otherwise). cancelRequests matches `owner` as the
  // listings show owners.
  int cancelRequests(std::string_view key,
                     std::optional<std::string_view> owner) override;
  std::vector<ClientBinding> listClients() override;
  void bindClient(std::string_view clientId, std::string_view role) override;
  bool unbindClient(std::string_view clientId) override;
  // dlm_purge_client (schema version 17 on; admin role).
  ClientPurge purgeClient(std::string_view clientId) override;
  // dlm_rebind_client (schema version 17 on; admin role).
  ClientPurge rebindClient(std::string_view clientId,
                           std::string_view role) override;
  StoreTime now() override;
  WaitRegistration registerWait(const WaitRequest& request) override;
  void unregisterWait(std::string_view key, std::string_view owner) override;
  bool subscribeReleases(ReleaseListener* listener) override;
  void unsubscribeReleases(ReleaseListener* listener) override;
  std::uint64_t reconnections() const override;
  // Receive the synchronous-replication warning (see
  // PostgresStoreOptions::synchronousReplication).
  void addWarningListener(StoreWarningListener* listener) noexcept override;
  void removeWarningListener(StoreWarningListener* listener) noexcept override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlm
