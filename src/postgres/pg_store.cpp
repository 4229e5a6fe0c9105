// dlm::PostgresStore: each operation is one prepared statement in autocommit
// on the store's own libpq connection (PgConn: every wait bounded by the
// call's deadline), calling a server function from schema/postgres.sql, so
// the function call is the whole transaction and one round trip: no BEGIN,
// no COMMIT. commitLock and guardWithin are the exceptions: they run in the
// application's own transaction, libpqxx or libpq (pg_app_transaction).
// Release notifications come from a PgReleaseChannel (its own connection and
// thread).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/crc32.h"
#include "common/hidden.h"
#include "common/utf8.h"
#include "dlm/deadline.h"
#include "dlm/lock_key.h"
#include "dlm/postgres_store.h"
#include "postgres/connection_pool.h"
#include "postgres/owner_digest.h"
#include "postgres/pg_app_transaction.h"
#include "postgres/pg_admin_calls.h"
#include "postgres/pg_array.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_conninfo.h"
#include "postgres/pg_errors.h"
#include "postgres/pg_migrate.h"
#include "postgres/pg_release_channel.h"
#include "postgres/pg_replication.h"
#include "postgres/pg_session.h"
#include "postgres/pg_statements.h"
#include "postgres/privilege_hint.h"
#include "postgres/schema_locator.h"
#include "postgres/store_notices.h"
#include "postgres/warning_listeners.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"

namespace dlm {
namespace {

using internal::ConnectionPool;
using internal::PgConn;
using internal::PgResult;
using Params = std::vector<const char*>;

StoreTime fromEpochMs(const PgResult& r, int row, int col) {
  if (r.isNull(row, col)) return StoreTime{};
  return StoreTime(std::chrono::milliseconds(r.int64(row, col)));
}

// A row of dlm_describe (withMode false: the row is the EXCLUSIVE state) or
// of dlm_holders (withMode: its 12th column tells SHARED), the login last.
LockRecord toRecord(const PgResult& r, int row, bool withMode) {
  LockRecord rec;
  rec.key = r.text(row, 0);
  rec.statusHeld = r.boolean(row, 1);
  rec.held = r.boolean(row, 2);
  rec.owner = r.text(row, 3);
  rec.fencingToken = r.int64(row, 4);
  rec.acquiredAt = fromEpochMs(r, row, 5);
  rec.expiresAt = fromEpochMs(r, row, 6);
  rec.ttl = std::chrono::milliseconds(r.int64(row, 7));
  rec.holder.host = r.text(row, 8);
  rec.holder.pid = r.int64(row, 9);
  // host(holder_ip): the address without its /32 (/128) mask; NULL (a unix
  // socket) reads as "".
  rec.holderIp = r.text(row, 10);
  if (withMode && r.boolean(row, 11)) rec.mode = LockMode::SHARED;
  // NULL (not an admin, or made before schema 17) reads as "".
  rec.login = r.text(row, withMode ? 12 : 11);
  return rec;
}

WaitRecord toWaitRecord(const PgResult& r, int row) {
  WaitRecord rec;
  rec.key = r.text(row, 0);
  rec.owner = r.text(row, 1);
  rec.requestedAt = fromEpochMs(r, row, 2);
  rec.expiresAt = fromEpochMs(r, row, 3);
  if (r.boolean(row, 4)) rec.mode = LockMode::SHARED;
  rec.login = r.text(row, 5);
  // NULL: no deadline recorded (none, or an older library's request).
  if (!r.isNull(row, 6)) rec.deadline = fromEpochMs(r, row, 6);
  return rec;
}

const char* sqlBoolean(bool value) { return value ? "true" : "false"; }

// Checks the shape of a one-row, one-column result.
const PgResult& single(const PgResult& r, const char* what) {
  if (r.rows() != 1 || r.columns() != 1) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       fmt::format("{} returned {} rows", what, r.rows()));
  }
  return r;
}

using internal::boundOrNull;

// A key's hierarchy as the dlm_* functions take it: the ancestors as a
// text[] literal, the descendant range as two nullable bounds.
struct Hierarchy {
  explicit Hierarchy(const StoreKey& key)
      : descBegin(boundOrNull(key.descendantsBegin)),
        descEnd(boundOrNull(key.descendantsEnd)) {
    std::vector<std::string_view> items(key.ancestors.begin(),
                                        key.ancestors.end());
    ancestors = internal::textArrayLiteral(items);
  }
  std::string ancestors;
  const char* descBegin;  // borrowed from the StoreKey
  const char* descEnd;
};

// SQLSTATE lock_not_available: lock_timeout (rowLockWait) expired.
constexpr const char* kLockNotAvailable = "55P03";

// The options of the listening connection: listenConnection's server, the
// rest as configured.
PostgresStoreOptions listenOptions(PostgresStoreOptions options) {
  if (!options.listenConnection.empty()) {
    options.connection = options.listenConnection;
  }
  return options;
}

}  // namespace

class DLM_HIDDEN PostgresStore::Impl {
 public:
  explicit Impl(PostgresStoreOptions options)
      : options_(std::move(options)),
        sessions_(options_),
        listenSessions_(listenOptions(options_)),
        pool_(options_.poolSize, options_.poolWait,
              [this](Deadline d) {
                auto conn = sessions_.openForStore(d);
                // First-use bindings become the listeners' warnings (run).
                conn->keepNotices(internal::kFirstUseBindingState);
                // The first connection that works after one died.
                if (connectionLost_.exchange(false)) {
                  reconnections_.fetch_add(1, std::memory_order_relaxed);
                }
                return conn;
              }),
        releases_(
            [this](Deadline d, int wakeFd) {
              return listenSessions_.open(d, wakeFd);
            },
            options_.operationTimeout) {}

  std::uint64_t reconnections() const {
    return reconnections_.load(std::memory_order_relaxed) +
           releases_.reconnections();
  }

  internal::WarningListeners& warnings() { return warnings_; }

  void addClient(std::string_view clientId) {
    sessions_.addClient(clientId);
    listenSessions_.addClient(clientId);
  }

  void initialize(bool applyMigrations) {
    // A LISTEN connection that cannot be opened only costs wake-ups (a
    // warning); a host name that does not exist is a mistake to refuse.
    if (!options_.listenConnection.empty()) {
      internal::requireResolvableHosts(
          options_.listenConnection,
          "the LISTEN connection (listenConnection, dlm_listen_host)");
    }
    const auto& migrations = internal::postgresMigrations();
    SchemaState state = readSchemaState("initialize");
    // Migrate only an older schema: a newer one that still serves this
    // library is fine as it is (rolling upgrades), and the common case
    // stays one round trip.
    if (applyMigrations &&
        state.version() < internal::latestVersion(migrations)) {
      internal::applyPostgresMigrations(options_);
      state = readSchemaState("initialize");
    }
    const std::string where =
        options_.schema.empty() ? std::string("the search_path")
                                : fmt::format("schema \"{}\"", options_.schema);
    if (!state.present) {
      throw DLMException(ErrorCode::SCHEMA_MISMATCH,
                         fmt::format("no dlm schema in {} (no table "
                                     "dlm_schema_version there); {}",
                                     where, howToApplySchema()));
    }
    // The rolling-upgrade rule: this schema version, or a newer one that
    // still serves it.
    internal::requireCompatibleSchema(
        state, migrations, "postgres",
        options_.schema.empty()
            ? std::string("the PostgreSQL search_path's schema")
            : fmt::format("PostgreSQL schema \"{}\"", options_.schema),
        "or run `dlmctl migrate`");
    if (options_.synchronousReplication !=
        SynchronousReplication::NOT_CHECKED) {
      const std::string warning = internal::enforceSynchronousReplication(
          options_.synchronousReplication,
          run("initialize", "", [](PgConn& c, Deadline d) {
            return internal::readReplicationSettings(c, d);
          }));
      if (!warning.empty()) warnings_.warn(warning);
    }
  }

  void close() {
    releases_.close();
    pool_.close();
  }

  AcquireResult tryAcquire(const AcquireRequest& request) {
    const StoreKey& key = request.key;
    std::vector<std::string_view> path;
    std::vector<std::int64_t> crcs;
    path.reserve(key.ancestors.size() + 1);
    crcs.reserve(key.ancestors.size() + 1);
    for (const auto& a : key.ancestors) {
      path.emplace_back(a);
      crcs.push_back(internal::crc32(a));
    }
    path.emplace_back(key.key);
    crcs.push_back(internal::crc32(key.key));
    const std::string keys = internal::textArrayLiteral(path);
    const std::string crcList = internal::bigintArrayLiteral(crcs);
    const std::string owner(request.owner);
    const std::string token(request.token);
    const std::string ttl = std::to_string(request.ttl.count());
    const std::string pid = std::to_string(request.holder.pid);
    const Params params{keys.c_str(),
                        crcList.c_str(),
                        boundOrNull(key.descendantsBegin),
                        boundOrNull(key.descendantsEnd),
                        owner.c_str(),
                        token.c_str(),
                        ttl.c_str(),
                        request.holder.host.c_str(),
                        pid.c_str(),
                        sqlBoolean(request.mode == LockMode::SHARED)};

    return run("acquire", key.key, [&](PgConn& c, Deadline d) {
      PgResult r;
      try {
        r = c.execPrepared(internal::pgStatements().acquire, params, d);
      } catch (const internal::PgError& e) {
        // Someone else's open transaction holds a row lock we need (a
        // SELECT ... FOR UPDATE, a long migration): the key is busy, which
        // is an answer, not a failure. The function's transaction rolled
        // back, so nothing changed.
        if (e.sqlstate() != kLockNotAvailable) throw;
        AcquireResult busy;
        busy.blockedBy = key.key;
        return busy;
      }
      if (r.rows() != 1) {
        throw DLMException(
            ErrorCode::INTERNAL_ERROR,
            fmt::format("dlm_try_acquire returned {} rows", r.rows()));
      }
      AcquireResult result;
      result.acquired = r.boolean(0, 0);
      if (result.acquired) {
        result.fencingToken = r.int64(0, 1);
        result.acquiredAt = fromEpochMs(r, 0, 2);
        result.expiresAt = fromEpochMs(r, 0, 3);
      } else {
        result.blockedBy = r.text(0, 4);
        result.queued = r.boolean(0, 5);
      }
      return result;
    });
  }

  bool release(const StoreKey& key, std::string_view token, LockMode mode) {
    const Hierarchy h(key);
    const std::string t(token);
    const Params params{key.key.c_str(), t.c_str(), h.ancestors.c_str(),
                        h.descBegin, h.descEnd};
    const bool shared = mode == LockMode::SHARED;
    const auto& statement = shared ? internal::pgStatements().releaseShared
                                   : internal::pgStatements().release;
    return run("release", key.key, [&](PgConn& c, Deadline d) {
      return single(c.execPrepared(statement, params, d),
                    shared ? "dlm_release_shared" : "dlm_release")
          .boolean(0, 0);
    });
  }

  void commitLock(AppTransaction& appTx, const StoreKey& key,
                  std::string_view token, LockMode mode) {
    internal::releaseInAppTransaction(appTx, functionSchema(), key, token,
                                      mode);
  }

  void guardWithin(AppTransaction& appTx, const StoreKey& key,
                   std::string_view token, LockMode mode) {
    internal::guardInAppTransaction(appTx, functionSchema(), key, token, mode);
  }

  WaitRegistration registerWait(const WaitRequest& request) {
    const Hierarchy h(request.key);
    const std::string owner(request.owner);
    const std::string maxWait = std::to_string(request.maxWait.count());
    const std::string untilDeadline =
        request.untilDeadline
            ? std::to_string(std::max<std::int64_t>(
                  request.untilDeadline->count(), 0))
            : std::string();
    const Params params{request.key.key.c_str(),
                        h.ancestors.c_str(),
                        h.descBegin,
                        h.descEnd,
                        owner.c_str(),
                        maxWait.c_str(),
                        sqlBoolean(request.mode == LockMode::SHARED),
                        request.untilDeadline ? untilDeadline.c_str() : nullptr};
    const auto keysOf = [](const PgResult& r) {
      std::vector<std::string> keys;
      keys.reserve(static_cast<std::size_t>(r.rows()));
      for (int row = 0; row < r.rows(); ++row) keys.push_back(r.text(row, 0));
      return keys;
    };
    WaitRegistration registration;
    registration.deadlockCycle =
        run("registerWait", request.key.key, [&](PgConn& c, Deadline d) {
          return keysOf(
              c.execPrepared(internal::pgStatements().registerWait, params, d));
        });
    if (!registration.deadlockCycle.empty()) return registration;
    // No table lock serialises registrations (a neighbour could hold it
    // open): the graph is walked again in a transaction of its own, after
    // this registration committed, so of two waits that close a cycle at
    // once the later to commit sees the other's row.
    const Params cycleParams{request.key.key.c_str(), owner.c_str()};
    registration.deadlockCycle =
        run("registerWait", request.key.key, [&](PgConn& c, Deadline d) {
          return keysOf(c.execPrepared(internal::pgStatements().waitCycle,
                                       cycleParams, d));
        });
    // A cycle found there leaves nothing recorded: dlm_wait_cycle deleted
    // the request row in the transaction that found it.
    if (registration.deadlockCycle.empty()) expectReleases(request.key.key);
    return registration;
  }

  // Makes release notifications that may unblock `key` reach its waiters:
  // they carry hints, not keys, and the server tells a waiter its key's
  // hints (once per key while remembered). Before the waiter's next attempt,
  // so a release after that attempt wakes it. A failure costs only the
  // wake-ups: the waiter polls.
  void expectReleases(const std::string& key) {
    if (!releases_.running() || releases_.hints().knows(key)) return;
    try {
      const Params params{key.c_str()};
      std::vector<std::string> hints =
          run("registerWait", key, [&](PgConn& c, Deadline d) {
            const PgResult r =
                c.execPrepared(internal::pgStatements().releaseHints, params, d);
            std::vector<std::string> out;
            for (int row = 0; row < r.rows(); ++row) {
              out.push_back(r.text(row, 0));
            }
            return out;
          });
      releases_.hints().expect(key, hints);
    } catch (const DLMException&) {
      // Polling (sleepBetweenRetries) finds the release instead.
    }
  }

  void unregisterWait(std::string_view key, std::string_view owner) {
    const std::string k(key), o(owner);
    run("unregisterWait", key, [&](PgConn& c, Deadline d) {
      c.execPrepared(internal::pgStatements().unregisterWait,
                     Params{k.c_str(), o.c_str()}, d);
    });
  }

  bool subscribeReleases(ReleaseListener* listener) {
    // Through a transaction pooler with no direct URL: nobody listens, and
    // waiters poll.
    if (options_.poolerSafe && options_.listenConnection.empty()) {
      return false;
    }
    std::string whyNot;
    if (releases_.subscribe(listener, &whyNot)) return true;
    // Waiters still get the lock, by polling: slower, and worth telling
    // (a misspelt dlm_listen_host, a LISTEN the server refuses).
    if (!whyNot.empty()) {
      warnings_.warn(fmt::format(
          "release notifications are off: the LISTEN connection{} could not "
          "be opened ({}); waiting acquires poll every sleepBetweenRetries",
          options_.listenConnection.empty()
              ? ""
              : " (listenConnection, dlm_listen_host/dlm_listen_port)",
          whyNot));
    }
    return false;
  }

  void unsubscribeReleases(ReleaseListener* listener) {
    releases_.unsubscribe(listener);
  }

  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) {
    const std::string k(key), t(token), ttlMs = std::to_string(ttl.count());
    const auto& statement = mode == LockMode::SHARED
                                ? internal::pgStatements().extendShared
                                : internal::pgStatements().extend;
    return run("extend", key,
               [&](PgConn& c, Deadline d) -> std::optional<StoreTime> {
                 const PgResult r = c.execPrepared(
                     statement, Params{k.c_str(), t.c_str(), ttlMs.c_str()}, d);
                 single(r, "dlm_extend");
                 // NULL: the token no longer holds the row.
                 if (r.isNull(0, 0)) return std::nullopt;
                 return fromEpochMs(r, 0, 0);
               });
  }

  std::optional<LockRecord> describe(std::string_view key) {
    const std::string k(key);
    return run("describe", key,
               [&](PgConn& c, Deadline d) -> std::optional<LockRecord> {
                 const PgResult r = c.execPrepared(
                     internal::pgStatements().describe, Params{k.c_str()}, d);
                 if (r.rows() == 0) return std::nullopt;
                 return toRecord(r, 0, /*withMode=*/false);
               });
  }

  // Holds of one key (exact) or under a prefix (the prefix range is
  // computed server side, dlm_prefix_end, so the function stays usable by
  // hand).
  std::vector<LockRecord> holds(const char* what, std::string_view key,
                                bool exact) {
    const std::string k(key);
    const auto& statement = exact ? internal::pgStatements().holdersOf
                                  : internal::pgStatements().listHeld;
    return run(what, key, [&](PgConn& c, Deadline d) {
      const PgResult r = c.execPrepared(statement, Params{k.c_str()}, d);
      std::vector<LockRecord> records;
      records.reserve(static_cast<std::size_t>(r.rows()));
      for (int row = 0; row < r.rows(); ++row) {
        records.push_back(toRecord(r, row, /*withMode=*/true));
      }
      return records;
    });
  }

  std::vector<WaitRecord> listWaiters(std::string_view keyPrefix) {
    const std::string prefix(keyPrefix);
    return run("listWaiters", keyPrefix, [&](PgConn& c, Deadline d) {
      const PgResult r = c.execPrepared(internal::pgStatements().listWaiters,
                                        Params{prefix.c_str()}, d);
      std::vector<WaitRecord> records;
      records.reserve(static_cast<std::size_t>(r.rows()));
      for (int row = 0; row < r.rows(); ++row) {
        records.push_back(toWaitRecord(r, row));
      }
      return records;
    });
  }

  // On a store connection, so the configured schema (its search_path), the
  // deadline and the pool apply as for every other call; no writes, no
  // initialize() needed.
  SchemaState schemaState() { return readSchemaState("schemaState"); }

  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) {
    if (idleFor.count() < 0 || batchSize <= 0) {
      throw DLMException(ErrorCode::INVALID_ARGUMENT,
                         "PostgreSQL store: purgeIdle: idleFor must not be "
                         "negative and batchSize must be positive");
    }
    const std::string idle = std::to_string(idleFor.count());
    const std::string batch = std::to_string(batchSize);
    const char* dry = dryRun ? "true" : "false";
    return run("purgeIdle", "", [&](PgConn& c, Deadline d) {
      const PgResult r =
          c.execPrepared(internal::pgStatements().purge,
                         Params{idle.c_str(), batch.c_str(), dry}, d);
      if (r.rows() != 1) {
        throw DLMException(ErrorCode::INTERNAL_ERROR,
                           fmt::format("dlm_purge returned {} rows", r.rows()));
      }
      PurgeBatch result;
      result.rows = r.int64(0, 0);
      result.fencingFloor = r.int64(0, 1);
      return result;
    });
  }

  bool forceRelease(std::string_view key) {
    const std::string k(key);
    return run("forceRelease", key, [&](PgConn& c, Deadline d) {
      return single(c.execPrepared(internal::pgStatements().forceRelease,
                                   Params{k.c_str()}, d),
                    "dlm_force_release")
          .boolean(0, 0);
    });
  }

  // The calls of postgres/pg_admin_calls: run() (deadline, pool, error
  // translation) around fn(connection, deadline).
  template <typename Fn>
  auto adminCall(std::string_view op, std::string_view key, Fn&& fn) {
    return run(op, key, std::forward<Fn>(fn));
  }

  StoreTime now() {
    return run("now", "", [](PgConn& c, Deadline d) {
      const PgResult r =
          c.execPrepared(internal::pgStatements().now, Params{}, d);
      return fromEpochMs(single(r, "dlm_now"), 0, 0);
    });
  }

 private:
  // The schema-version rows. One round trip on schema 3 and later (the
  // definer function dlm_schema_versions, which the application role may
  // call); on an older schema, where the function does not exist (42883),
  // a second statement reads the table as the previous release did. No
  // version table at all (42P01): not present. In autocommit a failed
  // statement leaves the connection usable.
  // What to do when no dlm schema is where this store looks: the dlm
  // schemas this database has, named, or (only when it has none) how to
  // create one (schema_locator.h).
  std::string howToApplySchema() {
    internal::SchemaSearch search;
    search.database = "DATABASE";
    search.asked = options_.schema;
    try {
      search = run("initialize", "", [&](PgConn& c, Deadline d) {
        return internal::searchDlmSchemas(c, d, options_.schema);
      });
    } catch (const DLMException&) {
      // Said in the advice: it could not look.
    }
    return internal::schemaAdvice(search);
  }

  SchemaState readSchemaState(std::string_view op) {
    return run(op, "", [](PgConn& c, Deadline d) {
      SchemaState state;
      const auto& st = internal::pgStatements();
      PgResult r;
      try {
        r = c.execPrepared(st.schemaVersions, Params{}, d);
      } catch (const internal::PgError& e) {
        if (e.sqlstate() != "42883") throw;
        try {
          r = c.execPrepared(st.schemaVersionsV1, Params{}, d);
        } catch (const internal::PgError& e2) {
          if (e2.sqlstate() == "42P01") return state;
          throw;
        }
      }
      state.present = true;
      state.applied.reserve(static_cast<std::size_t>(r.rows()));
      for (int row = 0; row < r.rows(); ++row) {
        AppliedMigration m;
        m.version = static_cast<int>(r.int64(row, 0));
        m.description = r.text(row, 1);
        m.appliedAt = r.text(row, 2);
        if (!r.isNull(row, 3)) {
          m.checksum = static_cast<std::uint32_t>(r.int64(row, 3));
        }
        // The newest row's declaration is the database's.
        state.compatibleFrom =
            r.isNull(row, 4) ? 0 : static_cast<int>(r.int64(row, 4));
        state.applied.push_back(std::move(m));
      }
      return state;
    });
  }

  // The schema holding the dlm functions: the configured one, else where
  // the search_path of the store's connections finds dlm_release_within
  // (looked up once).
  std::string functionSchema() {
    if (!options_.schema.empty()) return options_.schema;
    std::lock_guard<std::mutex> lock(schemaMu_);
    if (!resolvedSchema_) {
      const std::optional<std::string> found =
          run("commitLock", "",
              [](PgConn& c, Deadline d) -> std::optional<std::string> {
                const PgResult r = c.execPrepared(
                    internal::pgStatements().functionSchema, Params{}, d);
                if (r.rows() == 0 || r.isNull(0, 0)) return std::nullopt;
                return r.text(0, 0);
              });
      if (!found) {
        throw DLMException(ErrorCode::SCHEMA_MISMATCH,
                           "PostgreSQL store: commitLock: no function "
                           "dlm_release_within on the search_path; apply "
                           "migrations/postgres/ or run `dlmctl migrate`");
      }
      resolvedSchema_ = *found;
    }
    return *resolvedSchema_;
  }

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

PostgresStore::PostgresStore(PostgresStoreOptions options) {
  if (options.poolSize == 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::poolSize must be at least 1");
  }
  if (options.poolWait.count() < 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::poolWait must not be negative");
  }
  if (options.rowLockWait.count() <= 0) {
    // lock_timeout = 0 would mean "wait forever".
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::rowLockWait must be positive");
  }
  if (options.operationTimeout.count() <= 0) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        "PostgresStoreOptions::operationTimeout must be positive");
  }
  impl_ = std::make_unique<Impl>(std::move(options));
}

PostgresStore::~PostgresStore() = default;

std::string_view PostgresStore::name() const { return "postgres"; }
std::string PostgresStore::listedOwner(std::string_view owner) const {
  return internal::pgOwnerDigest(owner);
}

void PostgresStore::addClient(std::string_view clientId) noexcept {
  try {
    impl_->addClient(clientId);
  } catch (...) {
    // Out of memory: the label is a courtesy to DBAs, not worth failing for.
  }
}
std::uint64_t PostgresStore::reconnections() const {
  return impl_->reconnections();
}
void PostgresStore::addWarningListener(
    StoreWarningListener* listener) noexcept {
  impl_->warnings().add(listener);
}
void PostgresStore::removeWarningListener(
    StoreWarningListener* listener) noexcept {
  impl_->warnings().remove(listener);
}

void PostgresStore::initialize(bool applyMigrations) {
  impl_->initialize(applyMigrations);
}
void PostgresStore::close() { impl_->close(); }
AcquireResult PostgresStore::tryAcquire(const AcquireRequest& request) {
  return impl_->tryAcquire(request);
}
bool PostgresStore::release(const StoreKey& key, std::string_view token,
                            LockMode mode) {
  return impl_->release(key, token, mode);
}
void PostgresStore::commitLock(AppTransaction& tx, const StoreKey& key,
                               std::string_view token, LockMode mode) {
  impl_->commitLock(tx, key, token, mode);
}

void PostgresStore::guardWithin(AppTransaction& tx, const StoreKey& key,
                                std::string_view token, LockMode mode) {
  impl_->guardWithin(tx, key, token, mode);
}
std::optional<StoreTime> PostgresStore::extend(std::string_view key,
                                               std::string_view token,
                                               std::chrono::milliseconds ttl,
                                               LockMode mode) {
  return impl_->extend(key, token, ttl, mode);
}
std::optional<LockRecord> PostgresStore::describe(std::string_view key) {
  return impl_->describe(key);
}
std::vector<LockRecord> PostgresStore::holdersOf(std::string_view key) {
  return impl_->holds("holdersOf", key, /*exact=*/true);
}
std::vector<LockRecord> PostgresStore::listHeld(std::string_view keyPrefix) {
  return impl_->holds("listHeld", keyPrefix, /*exact=*/false);
}
std::vector<WaitRecord> PostgresStore::listWaiters(std::string_view keyPrefix) {
  return impl_->listWaiters(keyPrefix);
}
SchemaState PostgresStore::schemaState() { return impl_->schemaState(); }
PurgeBatch PostgresStore::purgeIdle(std::chrono::milliseconds idleFor,
                                    int batchSize, bool dryRun) {
  return impl_->purgeIdle(idleFor, batchSize, dryRun);
}

bool PostgresStore::forceRelease(std::string_view key) {
  return impl_->forceRelease(key);
}
StoreTime PostgresStore::now() { return impl_->now(); }

int PostgresStore::cancelRequests(std::string_view key,
                                  std::optional<std::string_view> owner) {
  internal::checkCancelArguments(key, owner);
  return impl_->adminCall("cancelRequests", key, [&](PgConn& c, Deadline d) {
    return internal::pgCancelRequests(c, d, key, owner);
  });
}

std::vector<ClientBinding> PostgresStore::listClients() {
  return impl_->adminCall("listClients", "", internal::pgListClients);
}

void PostgresStore::bindClient(std::string_view clientId,
                               std::string_view role) {
  internal::checkBindArguments(clientId, role);
  impl_->adminCall("bindClient", clientId, [&](PgConn& c, Deadline d) {
    internal::pgBindClient(c, d, clientId, role);
  });
}

bool PostgresStore::unbindClient(std::string_view clientId) {
  validateClientId(clientId);
  return impl_->adminCall("unbindClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgUnbindClient(c, d, clientId);
  });
}

ClientPurge PostgresStore::rebindClient(std::string_view clientId,
                                        std::string_view role) {
  internal::checkBindArguments(clientId, role);
  return impl_->adminCall("rebindClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgRebindClient(c, d, clientId, role);
  });
}

ClientPurge PostgresStore::purgeClient(std::string_view clientId) {
  validateClientId(clientId);
  return impl_->adminCall("purgeClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgPurgeClient(c, d, clientId);
  });
}

WaitRegistration PostgresStore::registerWait(const WaitRequest& request) {
  return impl_->registerWait(request);
}
void PostgresStore::unregisterWait(std::string_view key,
                                   std::string_view owner) {
  impl_->unregisterWait(key, owner);
}
bool PostgresStore::subscribeReleases(ReleaseListener* listener) {
  return impl_->subscribeReleases(listener);
}
void PostgresStore::unsubscribeReleases(ReleaseListener* listener) {
  impl_->unsubscribeReleases(listener);
}

}  // namespace dlm
