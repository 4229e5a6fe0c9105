#include "postgres/pg_migrate.h"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "migration.h"
#include "postgres/pg_errors.h"

namespace dlm::internal {
namespace {

// pg_advisory_xact_lock key serialising migrations in a database ("dlm_mig").
constexpr std::int64_t kMigrationLockKey = 0x646c6d5f6d6967;

std::unique_ptr<pqxx::connection> connect(const PostgresStoreOptions& options) {
  try {
    auto conn = std::make_unique<pqxx::connection>(options.connection);
    // The schema is chosen by search_path: the migration files create their
    // objects unqualified.
    if (!options.schema.empty()) {
      conn->set_variable("search_path", conn->quote_name(options.schema));
    }
    return conn;
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: connect");
  }
}

// Reads the version inside `tx` without raising an error when the table is
// missing (an error would abort the migration transaction).
int readVersion(pqxx::transaction_base& tx) {
  // Does dlm_schema_version exist on the search_path? Read from pg_class
  // with this statement's snapshot, not with to_regclass(): after waiting for
  // the advisory lock, this backend's catalog cache may not yet know about the
  // table another migrator just committed.
  const pqxx::result exists = tx.exec(
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE c.relname = 'dlm_schema_version' "
      "AND n.nspname = ANY (current_schemas(false)))");
  if (!exists[0][0].as<bool>()) return -1;
  // The newest migration applied.
  const pqxx::result r = tx.exec("SELECT max(version) FROM dlm_schema_version");
  return r[0][0].is_null() ? 0 : r[0][0].as<int>();
}

DLMException newerThanLibrary(int version, int latest) {
  return DLMException(
      ErrorCode::SCHEMA_MISMATCH,
      fmt::format("the dlm schema is at version {}, newer than this library "
                  "(which knows versions up to {}); upgrade the library",
                  version, latest));
}

// A named schema that does not exist would otherwise fail the first CREATE
// with the puzzling "no schema has been selected to create in" (3F000).
void requireSchema(pqxx::connection& conn, const std::string& schema) {
  bool exists = false;
  try {
    pqxx::nontransaction tx(conn);
    exists = tx.exec_params(
                   "SELECT EXISTS (SELECT 1 FROM pg_catalog."
                   "pg_namespace WHERE nspname = $1)",
                   schema)[0][0]
                 .as<bool>();
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: looking up the schema");
  }
  if (!exists) {
    throw DLMException(
        ErrorCode::TABLE_CREATION_ERROR,
        fmt::format("PostgreSQL migrate: schema \"{}\" does not exist; "
                    "create it first (CREATE SCHEMA {})",
                    schema, conn.quote_name(schema)));
  }
}

}  // namespace

int postgresSchemaVersion(const PostgresStoreOptions& options) {
  auto conn = connect(options);
  try {
    pqxx::nontransaction tx(*conn);
    return readVersion(tx);
  } catch (...) {
    throw translatePgError("PostgreSQL: reading the dlm schema version");
  }
}

int applyPostgresMigrations(const PostgresStoreOptions& options) {
  const auto& migrations = postgresMigrations();
  const int latest = latestVersion(migrations);
  auto conn = connect(options);

  int current;
  try {
    // Up to date is the common case: answer without taking the lock.
    pqxx::nontransaction tx(*conn);
    current = readVersion(tx);
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: reading the schema version");
  }
  if (current > latest) throw newerThanLibrary(current, latest);
  if (current < latest && !options.schema.empty()) {
    requireSchema(*conn, options.schema);
  }

  int applied = 0;
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    try {
      pqxx::work tx(*conn, "dlm_migrate");
      // Another process may be migrating the same database: wait for it,
      // then look again at what it left.
      tx.exec(
          fmt::format("SELECT pg_advisory_xact_lock({})", kMigrationLockKey));
      current = readVersion(tx);
      if (current > latest) throw newerThanLibrary(current, latest);
      if (current >= m.version) continue;  // applied meanwhile; tx rolls back
      // The migration file: several statements, sent as one simple query.
      tx.exec(std::string(m.sql));
      if (readVersion(tx) != m.version) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("PostgreSQL migrate: migrations/postgres/{} did not "
                        "record version {} in dlm_schema_version",
                        m.file, m.version));
      }
      tx.commit();
      current = m.version;
      ++applied;
    } catch (const DLMException&) {
      // Already classified above (newer schema, missing version row).
      throw;
    } catch (...) {
      // Whatever broke a migration (privileges, a conflicting object, a lost
      // connection) is reported as a failed migration, SQLSTATE included.
      const DLMException e = translatePgError(fmt::format(
          "PostgreSQL migrate: applying migrations/postgres/{}", m.file));
      throw DLMException(ErrorCode::TABLE_CREATION_ERROR, e.what());
    }
  }
  return applied;
}

}  // namespace dlm::internal
