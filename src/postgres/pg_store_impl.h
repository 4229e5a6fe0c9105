// PostgresStore::Impl, the PostgreSQL store's state and calls, shared by
// the files that define them: pg_store.cpp (construction, the public
// class), pg_schema_check.cpp (initialize, the schema's version and place),
// pg_lock_calls.cpp (the protocol's single calls), pg_batch_calls.cpp (its
// batch calls), pg_inspect_calls.cpp (listings, purge, force-release).
// run() is the one way a call reaches the server: a pooled connection, the
// call's deadline, failures translated.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/hidden.h"
#include "common/utf8.h"
#include "dlm/deadline.h"
#include "dlm/postgres_store.h"
#include "postgres/connection_pool.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_errors.h"
#include "postgres/pg_release_channel.h"
#include "postgres/pg_session.h"
#include "postgres/privilege_hint.h"
#include "postgres/store_notices.h"
#include "postgres/warning_listeners.h"
#include "schema/migration.h"

namespace dlm {

class DLM_HIDDEN PostgresStore::Impl {
  using ConnectionPool = internal::ConnectionPool;
  using PgConn = internal::PgConn;

 public:
  explicit Impl(PostgresStoreOptions options);

  std::uint64_t reconnections() const {
    return reconnections_.load(std::memory_order_relaxed) +
           releases_.reconnections();
  }

  internal::WarningListeners& warnings() { return warnings_; }

  void addClient(std::string_view clientId) {
    sessions_.addClient(clientId);
    listenSessions_.addClient(clientId);
  }

  void initialize(bool applyMigrations);

  void close();

  AcquireResult tryAcquire(const AcquireRequest& request);

  bool release(const StoreKey& key, std::string_view token, LockMode mode);

  void commitLock(AppTransaction& appTx, const StoreKey& key,
                  std::string_view token, LockMode mode);

  void guardWithin(AppTransaction& appTx, const StoreKey& key,
                   std::string_view token, LockMode mode);

  WaitRegistration registerWait(const WaitRequest& request);

  // Makes release notifications that may unblock `key` reach its waiters:
  // they carry hints, not keys, and the server tells a waiter its key's
  // hints (once per key while remembered). Before the waiter's next attempt,
  // so a release after that attempt wakes it. A failure costs only the
  // wake-ups: the waiter polls.
  void expectReleases(const std::string& key);

  void unregisterWait(std::string_view key, std::string_view owner);

  bool subscribeReleases(ReleaseListener* listener);

  void unsubscribeReleases(ReleaseListener* listener);

  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode);

  // pg_batch_calls.cpp
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests);
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests);
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests);
  AcquireAllResult tryAcquireAll(const std::vector<AcquireRequest>& requests);

  std::optional<LockRecord> describe(std::string_view key);

  // Holds of one key (exact) or under a prefix (the prefix range is
  // computed server side, dlm_prefix_end, so the function stays usable by
  // hand).
  std::vector<LockRecord> holds(const char* what, std::string_view key,
                                bool exact);

  std::vector<WaitRecord> listWaiters(std::string_view keyPrefix);

  // On a store connection, so the configured schema (its search_path), the
  // deadline and the pool apply as for every other call; no writes, no
  // initialize() needed.
  SchemaState schemaState() { return readSchemaState("schemaState"); }

  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun);

  bool forceRelease(std::string_view key);

  // The calls of postgres/pg_admin_calls: run() (deadline, pool, error
  // translation) around fn(connection, deadline).
  template <typename Fn>
  auto adminCall(std::string_view op, std::string_view key, Fn&& fn) {
    return run(op, key, std::forward<Fn>(fn));
  }

  StoreTime now();

 private:
  // What to do when no dlm schema is where this store looks: the dlm
  // schemas this database has, named, or (only when it has none) how to
  // create one (schema_locator.h).
  std::string howToApplySchema();

  // The schema-version rows. One round trip on schema 3 and later (the
  // definer function dlm_schema_versions, which the application role may
  // call); on an older schema, where the function does not exist (42883),
  // a second statement reads the table as the previous release did. No
  // version table at all (42P01): not present. In autocommit a failed
  // statement leaves the connection usable.
  SchemaState readSchemaState(std::string_view op);

  // The schema holding the dlm functions: the configured one, else where
  // the search_path of the store's connections finds dlm_release_within
  // (looked up once).
  std::string functionSchema();

  // Leases a connection, runs `fn(connection, deadline)` on it and
  // translates every failure, all by the call's deadline. A connection that
  // failed at the connection level is dropped, not pooled. When it was a
  // reused idle one, its siblings of the same generation most likely died
  // the same way (restart, mass termination): they are dropped too and the
  // call is made once more at once on a new connection. That is not a
  // retry of the caller's policy: the server never saw the first attempt
  // (or, if it did, the store's calls are safe to repeat, being
  // conditional on the caller's token).
  template <typename Fn>
  auto run(std::string_view op, std::string_view key, Fn&& fn)
      -> std::invoke_result_t<Fn&, PgConn&, Deadline> {
    // A PostgreSQL text value is valid UTF-8: no key or prefix that is not
    // can name anything, and the server would refuse it as an error.
    if (!internal::isValidUtf8(key)) {
      throw DLMException(ErrorCode::INVALID_ARGUMENT,
                         fmt::format("PostgreSQL store: {} {}: not valid UTF-8",
                                     op, internal::printableBytes(key)));
    }
    const Deadline deadline = deadlineOr(options_.operationTimeout);
    if (std::chrono::steady_clock::now() >= deadline) {
      // Nothing to wait for: fail without leasing (a pooled connection
      // would be closed for a reply it had no time to read).
      throw DLMException(
          ErrorCode::CONNECTION_ERROR,
          key.empty()
              ? fmt::format("PostgreSQL store: {}: deadline already passed", op)
              : fmt::format("PostgreSQL store: {} {}: deadline already passed",
                            op, internal::printableBytes(key)),
          true);
    }
    // Told when the call is over, after its lease went back to the pool.
    internal::CallNotices notices(warnings_);
    for (int attempt = 0;; ++attempt) {
      std::optional<ConnectionPool::Lease> lease;
      try {
        lease.emplace(pool_.lease(deadline));
        return notices.around(**lease, [&] { return fn(**lease, deadline); });
      } catch (...) {
        const bool lost = lease && !(*lease)->usable();
        if (lost) {
          lease->discard();
          connectionLost_.store(true);
        }
        if (lost && lease->reused() && attempt == 0 &&
            std::chrono::steady_clock::now() < deadline) {
          pool_.dropIdle(lease->generation());
          continue;
        }
        // A refused privilege: the roles that hold it here, while the
        // connection is at hand.
        std::string hint;
        try {
          throw;
        } catch (const internal::PgError& e) {
          if (e.sqlstate() == "42501" && lease && !lost) {
            hint = internal::privilegeHint(**lease, e.what(), deadline);
          }
        } catch (...) {
          // Not a server's refusal: no hint.
        }
        DLMException error = internal::translatePgError(
            key.empty() ? fmt::format("PostgreSQL store: {}", op)
                        : fmt::format("PostgreSQL store: {} {}", op,
                                      internal::printableBytes(key)));
        if (!hint.empty()) {
          error = DLMException(error.code(),
                               fmt::format("{}; {}", error.what(), hint),
                               error.transient());
        }
        if (lease && error.code() == ErrorCode::CONNECTION_ERROR) {
          lease->discard();
        }
        throw error;
      }
    }
  }

  const PostgresStoreOptions options_;
  // Set when a pooled connection is found dead; the next one opened counts
  // as a reconnection.
  std::atomic<bool> connectionLost_{false};
  std::atomic<std::uint64_t> reconnections_{0};
  internal::WarningListeners warnings_;
  internal::PgSessions sessions_;
  internal::PgSessions listenSessions_;  // listenConnection, or connection
  ConnectionPool pool_;
  internal::PgReleaseChannel releases_;
  std::mutex schemaMu_;
  std::optional<std::string> resolvedSchema_;  // guarded by schemaMu_
};

}  // namespace dlm
