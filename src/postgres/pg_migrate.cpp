#include "postgres/pg_migrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlm/deadline.h"
#include "schema/migration.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_errors.h"
#include "postgres/pg_session.h"
#include "postgres/schema_locator.h"
#include "schema/schema_compat.h"

namespace dlm::internal {
namespace {

// pg_advisory_xact_lock key serialising migrations in a database ("dlm_mig").
constexpr std::int64_t kMigrationLockKey = 0x646c6d5f6d6967;

// Migrations are DDL plus a wait for other migrators' advisory lock: they
// get more than one operationTimeout, but never an unbounded wait.
constexpr std::chrono::milliseconds kMinMigrationBound{60000};

Deadline migrationDeadline(const PostgresStoreOptions& options) {
  return deadlineOr(std::max(options.operationTimeout, kMinMigrationBound));
}

std::unique_ptr<PgConn> connect(const PostgresStoreOptions& options,
                                Deadline deadline) {
  // Outside the try: a malformed connection string is INVALID_ARGUMENT.
  const PgSessions sessions(options);
  try {
    std::unique_ptr<PgConn> conn = sessions.open(deadline);
    // The schema is chosen by search_path: the migration files create their
    // objects unqualified.
    if (!options.schema.empty()) {
      conn->exec("SET search_path = " + conn->quoteIdentifier(options.schema),
                 deadline);
    }
    return conn;
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: connect");
  }
}

// Reads the version inside the open transaction (if any) without raising
// an error when the table is missing (an error would abort the migration
// transaction).
int readVersion(PgConn& conn, Deadline deadline) {
  // Does dlm_schema_version exist on the search_path? Read from pg_class
  // with this statement's snapshot, not with to_regclass(): after waiting for
  // the advisory lock, this backend's catalog cache may not yet know about the
  // table another migrator just committed.
  const PgResult exists = conn.exec(
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE c.relname = 'dlm_schema_version' "
      "AND n.nspname = ANY (current_schemas(false)))",
      deadline);
  if (!exists.boolean(0, 0)) return -1;
  // The newest migration applied.
  const PgResult r =
      conn.exec("SELECT max(version) FROM dlm_schema_version", deadline);
  return r.isNull(0, 0) ? 0 : static_cast<int>(r.int64(0, 0));
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
// Where the database has dlm schemas elsewhere, they are named instead of
// advising to create this one: a name mistyped would start a second,
// independent set of locks.
void requireSchema(PgConn& conn, const std::string& schema, Deadline deadline) {
  bool exists = false;
  SchemaSearch search;
  try {
    exists = conn.execParams(
                     "SELECT EXISTS (SELECT 1 FROM pg_catalog."
                     "pg_namespace WHERE nspname = $1)",
                     {schema.c_str()}, deadline)
                 .boolean(0, 0);
    if (!exists) search = searchDlmSchemas(conn, deadline, schema);
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: looking up the schema");
  }
  if (!exists) {
    throw DLMException(
        ErrorCode::TABLE_CREATION_ERROR,
        fmt::format("PostgreSQL migrate: schema \"{}\" does not exist; {}",
                    schema, schemaAdvice(search)));
  }
}

// Does dlm_schema_version have the checksum column (schema 3 on)? Asked
// inside the migration's transaction, which sees its own ALTER TABLE.
bool hasChecksumColumn(PgConn& conn, Deadline deadline) {
  return conn
      .exec(
          "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a "
          "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
          "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
          "WHERE n.nspname = current_schema() "
          "AND c.relname = 'dlm_schema_version' "
          "AND a.attname = 'checksum' AND NOT a.attisdropped)",
          deadline)
      .boolean(0, 0);
}

// Records the checksum (CRC-32 of the text this applier ran) of each
// migration in `pending`, all applied by this run, and empties it. Run in
// a migration's transaction once the column exists: rows of migrations this
// run applied before the column existed get theirs then.
void recordChecksums(PgConn& conn, std::vector<const Migration*>& pending,
                     Deadline deadline) {
  if (pending.empty() || !hasChecksumColumn(conn, deadline)) return;
  for (const Migration* m : pending) {
    const std::string crc = std::to_string(migrationChecksum(*m));
    const std::string version = std::to_string(m->version);
    conn.execParams(
        "UPDATE dlm_schema_version SET checksum = $1::bigint "
        "WHERE version = $2::integer",
        {crc.c_str(), version.c_str()}, deadline);
  }
  pending.clear();
}

// Rolls back the open transaction, if the connection still works; a broken
// one rolls back in the server by itself.
void rollbackQuietly(PgConn& conn, Deadline deadline) noexcept {
  try {
    if (conn.usable()) conn.exec("ROLLBACK", deadline);
  } catch (...) {
    // Nothing more to do: the caller reports the original failure.
  }
}

}  // namespace

int postgresSchemaVersion(const PostgresStoreOptions& options) {
  const Deadline deadline = deadlineOr(options.operationTimeout);
  auto conn = connect(options, deadline);
  try {
    return readVersion(*conn, deadline);
  } catch (...) {
    throw translatePgError("PostgreSQL: reading the dlm schema version");
  }
}

int applyPostgresMigrations(const PostgresStoreOptions& options) {
  const auto& migrations = postgresMigrations();
  const int latest = latestVersion(migrations);
  // Connecting and looking are ordinary calls; only applying a migration
  // (DDL, waiting for another migrator) gets the longer bound.
  const Deadline lookDeadline = deadlineOr(options.operationTimeout);
  auto conn = connect(options, lookDeadline);

  int current;
  try {
    // Up to date is the common case: answer without taking the lock.
    current = readVersion(*conn, lookDeadline);
  } catch (...) {
    throw translatePgError("PostgreSQL migrate: reading the schema version");
  }
  if (current > latest) throw newerThanLibrary(current, latest);
  if (current < latest && !options.schema.empty()) {
    requireSchema(*conn, options.schema, lookDeadline);
  }

  const Deadline deadline = migrationDeadline(options);
  int applied = 0;
  // Applied by this run, checksum not recorded yet.
  std::vector<const Migration*> unrecorded;
  for (const Migration& m : migrations) {
    if (m.version <= current) continue;
    try {
      // Another process may be migrating the same database: wait for it,
      // then look again at what it left.
      conn->exec(fmt::format("BEGIN; SELECT pg_advisory_xact_lock({})",
                             kMigrationLockKey),
                 deadline);
      current = readVersion(*conn, deadline);
      if (current > latest) throw newerThanLibrary(current, latest);
      if (current >= m.version) {
        // Applied meanwhile.
        conn->exec("ROLLBACK", deadline);
        continue;
      }
      // The migration file: several statements, sent as one simple query.
      conn->exec(std::string(m.sql), deadline);
      if (readVersion(*conn, deadline) != m.version) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("PostgreSQL migrate: migrations/postgres/{} did not "
                        "record version {} in dlm_schema_version",
                        m.file, m.version));
      }
      unrecorded.push_back(&m);
      std::vector<const Migration*> recording = unrecorded;
      recordChecksums(*conn, recording, deadline);
      conn->exec("COMMIT", deadline);
      unrecorded.swap(recording);
      current = m.version;
      ++applied;
    } catch (const DLMException&) {
      rollbackQuietly(*conn, deadline);
      // A deadline that passed stays a (transient) connection error; the
      // rest was classified above (newer schema, missing version row).
      throw;
    } catch (...) {
      rollbackQuietly(*conn, deadline);
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
