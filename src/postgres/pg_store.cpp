// dlm::PostgresStore: each operation is one prepared statement in autocommit
// (pqxx::nontransaction), calling a server function from
// schema/postgres.sql, so the function call is the whole transaction and one
// round trip: no BEGIN, no COMMIT. releaseWithin is the exception: it runs
// in the application's own transaction. Release notifications come from a
// ReleaseChannel (its own connection and thread).
#include <fmt/format.h>

#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "crc32.h"
#include "dlm/postgres_store.h"
#include "migration.h"
#include "postgres/connection_pool.h"
#include "postgres/pg_array.h"
#include "postgres/pg_errors.h"
#include "postgres/pg_keys.h"
#include "postgres/pg_migrate.h"
#include "postgres/release_channel.h"

namespace dlm {
namespace {

using internal::ConnectionPool;

// Columns of a LockRecord, times as epoch milliseconds by the server clock.
constexpr const char* kRecordColumns =
    "resource, status = 'HELD', "
    "status = 'HELD' AND expires_at > clock_timestamp(), owner_id, "
    "fencing_token, floor(extract(epoch FROM acquired_at) * 1000)::bigint, "
    "floor(extract(epoch FROM expires_at) * 1000)::bigint, ttl_ms, "
    "holder_host, holder_pid";

// Every statement the store runs, prepared (lazily, on first use) on each
// connection.
const std::vector<std::pair<std::string, std::string>>& statements() {
  static const std::vector<std::pair<std::string, std::string>> kStatements{
      // The whole acquire transaction, server side (hierarchy protocol).
      {"dlm_acquire",
       "SELECT acquired, fencing_token, acquired_at_ms, expires_at_ms, "
       "blocked_by FROM dlm_acquire($1::text[], $2::bigint[], $3, $4, $5, $6, "
       "$7, $8, $9)"},
      // Token-conditional release, committed lazily; NOTIFYs when someone
      // waits (see the function).
      {"dlm_release", "SELECT dlm_release($1, $2, $3::text[], $4, $5)"},
      // Deadlock check + request row, serialised server side. One row per
      // key of the cycle, in order (none when registered), so no array
      // literal has to be parsed.
      {"dlm_register_wait",
       "SELECT u.k FROM unnest(dlm_register_wait($1, $2::text[], $3, $4, $5, "
       "$6)) WITH ORDINALITY AS u (k, i) ORDER BY u.i"},
      {"dlm_unregister_wait", "SELECT dlm_unregister_wait($1, $2)"},
      // Where dlm_release_within lives, for calling it schema-qualified on
      // the application's connection when no schema was configured.
      {"dlm_function_schema",
       "SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog."
       "pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = "
       "to_regprocedure('dlm_release_within(text, text, text[], text, "
       "text)')"},
      // Token-conditional lease extension.
      {"dlm_extend", "SELECT dlm_extend($1, $2, $3)"},
      // Operator override.
      {"dlm_force_release", "SELECT dlm_force_release($1)"},
      // One row by primary key; intention-only rows (never acquired,
      // fencing_token 0) count as "never locked".
      {"dlm_describe",
       fmt::format("SELECT {} FROM dlm_locks WHERE resource = $1 AND "
                   "fencing_token > 0",
                   kRecordColumns)},
      // Held rows under a prefix: primary-key range scan, then the exact
      // prefix test.
      {"dlm_list_held_range",
       fmt::format("SELECT {} FROM dlm_locks WHERE status = 'HELD' AND "
                   "resource >= $1 AND resource < $2 AND "
                   "starts_with(resource, $1) ORDER BY resource",
                   kRecordColumns)},
      // The same without an upper bound (empty or non-ASCII prefix).
      {"dlm_list_held_from",
       fmt::format("SELECT {} FROM dlm_locks WHERE status = 'HELD' AND "
                   "resource >= $1 AND starts_with(resource, $1) "
                   "ORDER BY resource",
                   kRecordColumns)},
      // The database clock.
      {"dlm_now",
       "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"},
      // The schema version initialize() checks.
      {"dlm_version", "SELECT max(version) FROM dlm_schema_version"},
  };
  return kStatements;
}

StoreTime fromEpochMs(const pqxx::field& f) {
  if (f.is_null()) return StoreTime{};
  return StoreTime(std::chrono::milliseconds(f.as<std::int64_t>()));
}

std::string textOrEmpty(const pqxx::field& f) {
  return f.is_null() ? std::string() : f.as<std::string>();
}

LockRecord toRecord(const pqxx::row& row) {
  LockRecord r;
  r.key = row[0].as<std::string>();
  r.statusHeld = row[1].as<bool>();
  r.held = !row[2].is_null() && row[2].as<bool>();
  r.owner = textOrEmpty(row[3]);
  r.fencingToken = row[4].as<std::int64_t>();
  r.acquiredAt = fromEpochMs(row[5]);
  r.expiresAt = fromEpochMs(row[6]);
  r.ttl = std::chrono::milliseconds(
      row[7].is_null() ? 0 : row[7].as<std::int64_t>());
  r.holder.host = textOrEmpty(row[8]);
  r.holder.pid = row[9].is_null() ? 0 : row[9].as<std::int64_t>();
  return r;
}

// The single value of a one-row, one-column result.
pqxx::field single(const pqxx::result& r, const char* what) {
  if (r.size() != 1 || r.columns() != 1) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       fmt::format("{} returned {} rows", what, r.size()));
  }
  return r[0][0];
}

// A bound of a descendant range as the dlm_* functions take it: NULL when
// empty (the hierarchy is off). Borrowed from `bound`.
const char* boundOrNull(const std::string& bound) {
  return bound.empty() ? nullptr : bound.c_str();
}

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

}  // namespace

class PostgresStore::Impl {
 public:
  explicit Impl(PostgresStoreOptions options)
      : options_(std::move(options)),
        pool_(options_.connection, options_.poolSize, options_.poolWait,
              [schema = options_.schema](pqxx::connection& c) {
                setUp(c, schema);
              }) {}

  void initialize(bool applyMigrations) {
    if (applyMigrations) internal::applyPostgresMigrations(options_);
    const auto& migrations = internal::postgresMigrations();
    const int latest = internal::latestVersion(migrations);
    const int version = run("initialize", "", [](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      try {
        const pqxx::field f =
            single(tx.exec_prepared("dlm_version"), "dlm_version");
        // An empty version table means nothing applied yet.
        return f.is_null() ? 0 : f.as<int>();
      } catch (const pqxx::undefined_table&) {
        // No dlm schema at all: reported below with what to apply.
        return -1;
      }
    });
    const std::string where =
        options_.schema.empty() ? std::string("the search_path")
                                : fmt::format("schema \"{}\"", options_.schema);
    if (version < 0) {
      throw DLMException(
          ErrorCode::SCHEMA_MISMATCH,
          fmt::format("PostgreSQL database has no dlm schema (no table "
                      "dlm_schema_version in {}); apply "
                      "migrations/postgres/{} or run `dlmctl migrate`",
                      where,
                      migrations.empty() ? "" : migrations.front().file));
    }
    if (version < latest) {
      std::string_view missing;
      for (const auto& m : migrations) {
        if (m.version > version) {
          missing = m.file;
          break;
        }
      }
      throw DLMException(
          ErrorCode::SCHEMA_MISMATCH,
          fmt::format("the dlm schema in {} is at version {}, this library "
                      "needs version {}: apply migrations/postgres/{} (and "
                      "the later ones) or run `dlmctl migrate`",
                      where, version, latest, missing));
    }
    if (version > latest) {
      throw DLMException(
          ErrorCode::SCHEMA_MISMATCH,
          fmt::format("the dlm schema in {} is at version {}, newer than "
                      "this library (which knows versions up to {}); upgrade "
                      "the library",
                      where, version, latest));
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
    const char* descBegin = boundOrNull(key.descendantsBegin);
    const char* descEnd = boundOrNull(key.descendantsEnd);
    const std::string owner(request.owner);
    const std::string token(request.token);
    const std::int64_t ttl = request.ttl.count();

    return run("acquire", key.key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      const pqxx::result r = tx.exec_prepared(
          "dlm_acquire", keys, crcList, descBegin, descEnd, owner, token, ttl,
          request.holder.host, request.holder.pid);
      if (r.size() != 1) {
        throw DLMException(
            ErrorCode::INTERNAL_ERROR,
            fmt::format("dlm_acquire returned {} rows", r.size()));
      }
      AcquireResult result;
      result.acquired = r[0][0].as<bool>();
      if (result.acquired) {
        result.fencingToken = r[0][1].as<std::int64_t>();
        result.acquiredAt = fromEpochMs(r[0][2]);
        result.expiresAt = fromEpochMs(r[0][3]);
      } else {
        result.blockedBy = textOrEmpty(r[0][4]);
      }
      return result;
    });
  }

  bool release(const StoreKey& key, std::string_view token) {
    const Hierarchy h(key);
    const std::string t(token);
    return run("release", key.key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return single(tx.exec_prepared("dlm_release", key.key, t, h.ancestors,
                                     h.descBegin, h.descEnd),
                    "dlm_release")
          .as<bool>();
    });
  }

  void releaseWithin(AppTransaction& appTx, const StoreKey& key,
                     std::string_view token) {
    auto* adapter = dynamic_cast<PostgresTransaction*>(&appTx);
    if (adapter == nullptr) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("PostgreSQL store: releaseWithin {}: the application "
                      "transaction must be a dlm::PostgresTransaction",
                      key.key));
    }
    pqxx::transaction_base& tx = adapter->transaction();
    // A nontransaction commits each statement at once: there is no
    // transaction for the release to be part of.
    if (dynamic_cast<pqxx::nontransaction*>(&tx) != nullptr) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("PostgreSQL store: releaseWithin {}: a "
                      "pqxx::nontransaction is not an open transaction",
                      key.key));
    }
    // Limitation: libpqxx 6.4 sends exec_params on a transaction object
    // that was already committed or aborted, in autocommit, and offers no
    // way to ask whether it is open without a round trip. Such a call then
    // releases at once (what rollbackLock would do) instead of failing
    // with INVALID_ARGUMENT.
    const std::string schema = functionSchema();
    const Hierarchy h(key);
    const std::string t(token);
    try {
      // Not prepared: that would leave a statement behind on the
      // application's connection. Schema-qualified because that connection's
      // search_path need not name dlm's schema (the function pins its own).
      tx.exec_params("SELECT " + tx.conn().quote_name(schema) +
                         ".dlm_release_within($1, $2, $3::text[], $4, $5)",
                     key.key, t, h.ancestors, h.descBegin, h.descEnd);
    } catch (const pqxx::usage_error& e) {
      // libpqxx refused the statement (a transaction it knows is closed).
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("PostgreSQL store: releaseWithin {}: the application "
                      "transaction is not open: {}",
                      key.key, e.what()));
    } catch (...) {
      // DLM01 (lock lost) becomes LOCK_NOT_HELD. Any error has aborted the
      // application's transaction in the server, so its COMMIT would roll
      // back, but silently: libpqxx 6.4 does not count a failed exec_params
      // against the transaction object and its commit() would return
      // normally. A failed exec() does count (libpqxx aborts the
      // transaction), so after this the application's commit() throws.
      DLMException error = internal::translatePgError(
          fmt::format("PostgreSQL store: releaseWithin {}", key.key));
      try {
        tx.exec("SELECT 1", "dlm: the transaction failed in commitLock");
      } catch (...) {
        // Expected: "current transaction is aborted" (25P02).
      }
      throw error;
    }
  }

  WaitRegistration registerWait(const WaitRequest& request) {
    const Hierarchy h(request.key);
    const std::string owner(request.owner);
    const std::int64_t maxWait = request.maxWait.count();
    return run("registerWait", request.key.key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      const pqxx::result r =
          tx.exec_prepared("dlm_register_wait", request.key.key, h.ancestors,
                           h.descBegin, h.descEnd, owner, maxWait);
      WaitRegistration registration;
      registration.deadlockCycle.reserve(r.size());
      for (const auto& row : r) {
        registration.deadlockCycle.push_back(row[0].as<std::string>());
      }
      return registration;
    });
  }

  void unregisterWait(std::string_view key, std::string_view owner) {
    const std::string k(key), o(owner);
    run("unregisterWait", key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      tx.exec_prepared("dlm_unregister_wait", k, o);
    });
  }

  bool subscribeReleases(ReleaseListener* listener) {
    return releases_.subscribe(listener);
  }

  void unsubscribeReleases(ReleaseListener* listener) {
    releases_.unsubscribe(listener);
  }

  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl) {
    const std::string k(key), t(token);
    const std::int64_t ttlMs = ttl.count();
    return run(
        "extend", key, [&](pqxx::connection& c) -> std::optional<StoreTime> {
          pqxx::nontransaction tx(c);
          const pqxx::field f =
              single(tx.exec_prepared("dlm_extend", k, t, ttlMs), "dlm_extend");
          // NULL: the token no longer holds the row.
          if (f.is_null()) return std::nullopt;
          return fromEpochMs(f);
        });
  }

  std::optional<LockRecord> describe(std::string_view key) {
    const std::string k(key);
    return run("describe", key,
               [&](pqxx::connection& c) -> std::optional<LockRecord> {
                 pqxx::nontransaction tx(c);
                 const pqxx::result r = tx.exec_prepared("dlm_describe", k);
                 if (r.empty()) return std::nullopt;
                 return toRecord(r[0]);
               });
  }

  std::vector<LockRecord> listHeld(std::string_view keyPrefix) {
    const std::string prefix(keyPrefix);
    const std::optional<std::string> upper = internal::prefixUpperBound(prefix);
    return run("listHeld", keyPrefix, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      const pqxx::result r =
          upper ? tx.exec_prepared("dlm_list_held_range", prefix, *upper)
                : tx.exec_prepared("dlm_list_held_from", prefix);
      std::vector<LockRecord> records;
      records.reserve(r.size());
      for (const auto& row : r) records.push_back(toRecord(row));
      return records;
    });
  }

  bool forceRelease(std::string_view key) {
    const std::string k(key);
    return run("forceRelease", key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return single(tx.exec_prepared("dlm_force_release", k),
                    "dlm_force_release")
          .as<bool>();
    });
  }

  StoreTime now() {
    return run("now", "", [](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      return fromEpochMs(single(tx.exec_prepared("dlm_now"), "dlm_now"));
    });
  }

 private:
  // Runs on each new connection: the schema and the statement definitions
  // (the server sees each statement's PREPARE on its first use).
  static void setUp(pqxx::connection& c, const std::string& schema) {
    if (!schema.empty()) {
      // set_variable (not a raw SET) so that libpqxx restores it should it
      // ever reopen this connection itself.
      c.set_variable("search_path", c.quote_name(schema));
    }
    // Custom plans were re-made on every call of dlm_acquire (its
    // descendant range check), about 0.05 ms of planning per acquire; the
    // generic plans are the same index scans. PostgreSQL 12 and later only.
    if (c.server_version() >= 120000) {
      c.set_variable("plan_cache_mode", "force_generic_plan");
    }
    for (const auto& [name, sql] : statements()) c.prepare(name, sql);
  }

  // The schema holding the dlm functions: the configured one, else where
  // the search_path of the store's connections finds dlm_release_within
  // (looked up once).
  std::string functionSchema() {
    if (!options_.schema.empty()) return options_.schema;
    std::lock_guard<std::mutex> lock(schemaMu_);
    if (!resolvedSchema_) {
      const pqxx::result r = run("releaseWithin", "", [](pqxx::connection& c) {
        pqxx::nontransaction tx(c);
        return tx.exec_prepared("dlm_function_schema");
      });
      if (r.empty() || r[0][0].is_null()) {
        throw DLMException(ErrorCode::SCHEMA_MISMATCH,
                           "PostgreSQL store: releaseWithin: no function "
                           "dlm_release_within on the search_path; apply "
                           "migrations/postgres/ or run `dlmctl migrate`");
      }
      resolvedSchema_ = r[0][0].as<std::string>();
    }
    return *resolvedSchema_;
  }

  // Leases a connection, runs `fn` on it and translates every failure; a
  // connection that failed at the connection level is dropped, not pooled.
  template <typename Fn>
  auto run(std::string_view op, std::string_view key, Fn&& fn)
      -> std::invoke_result_t<Fn&, pqxx::connection&> {
    std::optional<ConnectionPool::Lease> lease;
    try {
      lease.emplace(pool_.lease());
      return fn(**lease);
    } catch (...) {
      DLMException error = internal::translatePgError(
          key.empty() ? fmt::format("PostgreSQL store: {}", op)
                      : fmt::format("PostgreSQL store: {} {}", op, key));
      if (lease && (error.code() == ErrorCode::CONNECTION_ERROR ||
                    !(*lease)->is_open())) {
        lease->discard();
      }
      throw error;
    }
  }

  const PostgresStoreOptions options_;
  ConnectionPool pool_;
  internal::ReleaseChannel releases_{options_.connection};
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
  impl_ = std::make_unique<Impl>(std::move(options));
}

PostgresStore::~PostgresStore() = default;

std::string_view PostgresStore::name() const { return "postgres"; }
void PostgresStore::initialize(bool applyMigrations) {
  impl_->initialize(applyMigrations);
}
void PostgresStore::close() { impl_->close(); }
AcquireResult PostgresStore::tryAcquire(const AcquireRequest& request) {
  return impl_->tryAcquire(request);
}
bool PostgresStore::release(const StoreKey& key, std::string_view token) {
  return impl_->release(key, token);
}
void PostgresStore::releaseWithin(AppTransaction& tx, const StoreKey& key,
                                  std::string_view token) {
  impl_->releaseWithin(tx, key, token);
}
std::optional<StoreTime> PostgresStore::extend(std::string_view key,
                                               std::string_view token,
                                               std::chrono::milliseconds ttl) {
  return impl_->extend(key, token, ttl);
}
std::optional<LockRecord> PostgresStore::describe(std::string_view key) {
  return impl_->describe(key);
}
std::vector<LockRecord> PostgresStore::listHeld(std::string_view keyPrefix) {
  return impl_->listHeld(keyPrefix);
}
bool PostgresStore::forceRelease(std::string_view key) {
  return impl_->forceRelease(key);
}
StoreTime PostgresStore::now() { return impl_->now(); }

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
