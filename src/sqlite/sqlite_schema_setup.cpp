#include "sqlite/sqlite_schema_setup.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "dlm/error.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"

namespace dlm::internal::sqlite {

namespace {

// Ends the "apply migrations/sqlite/V<n>__... and the later ones" message.
std::string migrateHint(const std::string& path) {
  return fmt::format("with `dlmctl migrate --db sqlite:{}`", path);
}

// Whether the version table has V3's checksum and compatible_from columns
// (added together by V3; a version-2 file has neither).
bool hasVersionColumnsOfV3(Connection& c) {
  Statement columns = c.statement(
      "SELECT count(*) FROM pragma_table_info('dlm_schema_version') "
      "WHERE name IN ('checksum', 'compatible_from')");
  return columns.step() && columns.integer(0) == 2;
}

// Whether the file has dlm's version table.
bool hasVersionTable(Connection& c) {
  // sqlite_master tells whether the table exists without provoking (and
  // then having to tell apart) a "no such table" error.
  Statement exists = c.statement(
      "SELECT count(*) FROM sqlite_master "
      "WHERE type = 'table' AND name = 'dlm_schema_version'");
  return exists.step() && exists.integer(0) != 0;
}

// The highest applied migration, 0 when the version table does not exist.
int schemaVersion(Connection& c) {
  if (!hasVersionTable(c)) return 0;
  Statement version =
      c.statement("SELECT coalesce(max(version), 0) FROM dlm_schema_version");
  version.step();
  return static_cast<int>(version.integer(0));
}

// Records the checksum of each migration in `applied` (applied by this run),
// once the version table has the column (V3 adds it; the checksums of V1 and
// V2 applied in the same run are recorded in V3's transaction). Returns
// whether it recorded them, so the caller forgets them only then.
bool recordChecksums(Connection& c,
                     const std::vector<const Migration*>& applied) {
  if (!hasVersionColumnsOfV3(c)) return false;
  for (const Migration* m : applied) {
    c.statement(
         "UPDATE dlm_schema_version SET checksum = ?2 WHERE version = ?1")
        .bind(1, static_cast<std::int64_t>(m->version))
        .bind(2, static_cast<std::int64_t>(migrationChecksum(*m)))
        .run();
  }
  return true;
}

// A file without dlm's tables gets them all in one write transaction: a
// process that opens the same new file meanwhile finds either no schema
// (and waits for this transaction's write lock, then finds it whole) or the
// whole schema, never a part of it.
void createSchema(Connection& c) {
  try {
    Transaction tx(c, Durability::kDurable);
    if (hasVersionTable(c)) {  // another process made it first
      tx.commit();
      return;
    }
    std::vector<const Migration*> applied;
    for (const auto& m : sqliteMigrations()) {
      const std::string sql(m.sql);  // exec needs a NUL-terminated string
      c.execute(sql.c_str(),
                fmt::format("applying migrations/sqlite/{}", m.file));
      applied.push_back(&m);
    }
    recordChecksums(c, applied);
    tx.commit();
  } catch (const DLMException& e) {
    if (e.code() == ErrorCode::TABLE_CREATION_ERROR) throw;
    throw DLMException(ErrorCode::TABLE_CREATION_ERROR,
                       fmt::format("sqlite store '{}': creating dlm's tables "
                                   "failed: {} (rolled back)",
                                   c.path(), e.what()),
                       e.transient());
  }
}

void applyMissingMigrations(Connection& c, int from) {
  // Applied by this run, checksum not yet recorded.
  std::vector<const Migration*> unrecorded;
  for (const auto& m : sqliteMigrations()) {
    if (m.version <= from) continue;
    const std::string what =
        fmt::format("applying migrations/sqlite/{}", m.file);
    try {
      // One transaction per migration; the write lock serialises processes
      // initializing the same file at once.
      Transaction tx(c, Durability::kDurable);
      // Re-read inside the lock: another process may have applied it since.
      const int current = schemaVersion(c);
      if (current >= m.version) {
        tx.commit();
        continue;
      }
      if (current != m.version - 1) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("sqlite store '{}': {} failed: schema version is {}, "
                        "expected {}",
                        c.path(), what, current, m.version - 1));
      }
      const std::string sql(m.sql);  // exec needs a NUL-terminated string
      c.execute(sql.c_str(), what);
      // The migration records its own version row; check it did.
      if (schemaVersion(c) != m.version) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("sqlite store '{}': {} failed: it did not record "
                        "schema version {}",
                        c.path(), what, m.version));
      }
      // The text just run, exactly: a file changed later shows as drift.
      unrecorded.push_back(&m);
      const bool recorded = recordChecksums(c, unrecorded);
      tx.commit();
      if (recorded) unrecorded.clear();
    } catch (const DLMException& e) {
      // Any failure while applying (busy included) is reported as such; the
      // message already carries the path, the file and the SQLite code.
      if (e.code() == ErrorCode::TABLE_CREATION_ERROR) throw;
      throw DLMException(ErrorCode::TABLE_CREATION_ERROR,
                         fmt::format("{} (rolled back)", e.what()),
                         e.transient());
    }
  }
}

}  // namespace

SchemaState readSchemaState(Connection& c) {
  SchemaState state;
  {
    Statement exists = c.statement(
        "SELECT count(*) FROM sqlite_master "
        "WHERE type = 'table' AND name = 'dlm_schema_version'");
    if (!exists.step() || exists.integer(0) == 0) return state;
  }
  state.present = true;
  // applied_at is already UTC ISO-8601 text (the column's default). Files
  // before version 3 have no checksum or compatible_from: read as NULL.
  Statement rows = c.statement(
      hasVersionColumnsOfV3(c)
          ? "SELECT version, description, applied_at, checksum, "
            "compatible_from FROM dlm_schema_version ORDER BY version"
          : "SELECT version, description, applied_at, NULL, NULL "
            "FROM dlm_schema_version ORDER BY version");
  int compatibleFrom = 0;
  while (rows.step()) {
    AppliedMigration m;
    m.version = static_cast<int>(rows.integer(0));
    m.description = rows.text(1);
    m.appliedAt = rows.text(2);
    if (!rows.isNull(3)) {
      m.checksum = static_cast<std::uint32_t>(rows.integer(3));
    }
    // The newest row's declaration counts; NULL means not recorded (0).
    compatibleFrom = rows.isNull(4) ? 0 : static_cast<int>(rows.integer(4));
    state.applied.push_back(std::move(m));
  }
  state.compatibleFrom = compatibleFrom;
  return state;
}

void initializeSchemaIn(Connection& c, bool applyMigrations) {
  const auto& migrations = sqliteMigrations();
  const int latest = latestVersion(migrations);
  // The store's own file: one without dlm's tables (new, or the
  // application's own database) gets them, asked or not. An older dlm
  // schema is migrated only when asked (applyMigrations, `dlmctl
  // migrate`): processes of an older library may still use the file,
  // and reading (dlmctl list) must not change it.
  if (!hasVersionTable(c)) createSchema(c);
  const int current = schemaVersion(c);
  if (current < latest && applyMigrations) applyMissingMigrations(c, current);
  // The rolling-upgrade rule (src/schema_compat.h): this version, or a
  // newer one that still declares it serves this library's version.
  requireCompatibleSchema(readSchemaState(c), migrations, "sqlite",
                          fmt::format("sqlite store '{}'", c.path()),
                          migrateHint(c.path()));
}

}  // namespace dlm::internal::sqlite
