// Store environments for tests: each one is a fresh, private database with
// dlm's schema applied (a temp SQLite file, or a new schema in the PostgreSQL
// server named by libpq's PG* variables, used through a role that has only
// the privileges the schema grants). Destroying the environment removes it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlm/app_transaction.h"
#include "dlm/lock_store.h"

namespace dlm::test {

// The application's own open transaction on a store environment's database,
// as commitLock receives it. Rolled back on destruction if still open.
class AppSession {
 public:
  virtual ~AppSession() = default;
  // The store adapter (PostgresTransaction / LibpqTransaction /
  // SqliteTransaction) for it.
  virtual AppTransaction& adapter() = 0;
  // Inserts `marker` into the application's own table in this transaction.
  virtual void write(const std::string& marker) = 0;
  // Throws (any std::exception) when the commit fails.
  virtual void commit() = 0;
  virtual void rollback() = 0;
};

// The budget of the environments' stores when no deadline is set (the
// PostgreSQL store's operationTimeout, the SQLite store's busyTimeout): tests
// of behaviour (who may hold what, which answer comes back) must not fail
// because a busy machine answered in six seconds instead of one. A manager's
// own operationTimeout (LockConfiguration, 5 s by default) still bounds
// every call made through it, and the tests of time bounds set theirs.
inline constexpr std::chrono::milliseconds kTestStoreBudget{
    std::chrono::seconds(30)};

class StoreEnvironment {
 public:
  virtual ~StoreEnvironment() = default;

  // "sqlite" or "postgres".
  virtual std::string name() const = 0;
  // A new store object on this environment's database (as another process
  // would have), initialized; its budget is kTestStoreBudget.
  virtual std::shared_ptr<LockStore> newStore() = 0;
  // A new store object on an EMPTY database of the same kind (no dlm schema),
  // not initialized. For SCHEMA_MISMATCH tests.
  virtual std::shared_ptr<LockStore> newEmptyStore() = 0;
  // What another process passes to dlm::openStore to reach this database.
  virtual std::string url() const = 0;
  // The PostgreSQL schema ("" for SQLite).
  virtual std::string postgresSchema() const = 0;
  // Opens a transaction of the application's own (its own connection; on
  // PostgreSQL with the default search_path, which does not name dlm's
  // schema) on this database.
  virtual std::unique_ptr<AppSession> beginAppTransaction() = 0;
  // Whether a committed application row holds `marker`.
  virtual bool appRowExists(const std::string& marker) = 0;
};

// "<prefix>_<pid>_<8 random hex digits>": unique across concurrent runs.
std::string uniqueName(const std::string& prefix);

// A fresh temp SQLite file.
std::unique_ptr<StoreEnvironment> makeSqliteEnvironment();
// A fresh PostgreSQL schema. Throws (failing the test) when the server named
// by the PG* variables cannot be reached: PostgreSQL tests never skip.
std::unique_ptr<StoreEnvironment> makePostgresEnvironment();
// "sqlite", "postgres", "pgbouncer" (see conformanceStores) or "libpq"
// (see appTransactionStores).
std::unique_ptr<StoreEnvironment> makeEnvironment(const std::string& name);

// The store names compiled in, for INSTANTIATE_TEST_SUITE_P.
std::vector<std::string> compiledStores();
// compiledStores(), plus "pgbouncer" (PostgreSQL through PgBouncer in
// transaction pooling, pooler-safe store) when PostgreSQL is compiled in:
// what the conformance suite runs on.
std::vector<std::string> conformanceStores();
// conformanceStores(), plus "libpq" (PostgreSQL, the application's
// transactions on plain libpq connections: LibpqTransaction) when
// PostgreSQL is compiled in: what the tests of guardWithin and commitLock
// run on.
std::vector<std::string> appTransactionStores();

}  // namespace dlm::test
