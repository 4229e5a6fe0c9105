// dlmctl schema status and migrate: what the database's schema is, and
// bringing it to this build's version.
#include <fmt/format.h>

#include <cstdlib>

#include "commands.h"
#include "output_text.h"
#include "table.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"
#include "dlm/schema_version.h"
#include "dlm/store_url.h"
#include "dlm/version.h"

namespace dlm::cli {
namespace {

// schema status: this build can use the database (its version, or a newer
// one that still serves it) / migrations are pending / the database is
// newer than this build and no longer serves it.
constexpr int kSchemaCurrent = 0;
constexpr int kSchemaPending = 3;
constexpr int kSchemaNewer = 4;
// An applied migration's recorded checksum differs from this build's file.
constexpr int kSchemaDrift = 5;

// The migrations this build ships that `state` lacks, in order.
std::vector<KnownMigration> pendingMigrations(const LockStore& store,
                                              const SchemaState& state) {
  std::vector<KnownMigration> pending;
  for (KnownMigration& m : knownMigrations(store.name())) {
    if (m.version > state.version()) pending.push_back(std::move(m));
  }
  return pending;
}

// "ok", "DRIFT" (counted in `drifted`), "not recorded" (applied by hand or
// before checksums were kept) or "unknown file" (newer than this build).
std::string checksumText(const LockStore& store, const AppliedMigration& m,
                         int& drifted) {
  if (!m.checksum) return "not recorded";
  for (const KnownMigration& file : knownMigrations(store.name())) {
    if (file.version != m.version) continue;
    if (file.checksum == *m.checksum) return "ok";
    ++drifted;
    return fmt::format("DRIFT ({:08x}, file {:08x})", *m.checksum,
                       file.checksum);
  }
  return "unknown file";
}

SchemaState readState(LockStore& store) {
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  return adminOf(store).schemaState();
}

// "database sqlite:/x.sqlite (SQLite)", once (not "sqlite database
// sqlite:...").
std::string where(const GlobalOptions& global, const LockStore& store) {
  return "database " + databaseText(global, store.name());
}

}  // namespace

int runSchemaStatus(const GlobalOptions& global) {
  // Reading the version table creates nothing, not even a SQLite file.
  auto store = openCliStore(global);
  const SchemaState state = readState(*store);
  store->close();
  const int needed = requiredSchemaVersion(store->name());

  fmt::print("{}\n", where(global, *store));
  if (!state.present) {
    fmt::print("version found:  none (no dlm schema)\n");
  } else {
    fmt::print("version found:  {}\n", state.version());
  }
  fmt::print("version needed: {} (dlm {})\n", needed, version());
  if (state.version() > 0) {
    fmt::print(
        "serves libraries built for schema version {} or later\n",
        state.compatibleFrom > 0 ? state.compatibleFrom : state.version());
  }
  int drifted = 0;
  if (!state.applied.empty()) {
    Table applied({"APPLIED", "VERSION", "CHECKSUM", "DESCRIPTION"});
    for (const AppliedMigration& m : state.applied) {
      applied.add({printable(m.appliedAt), std::to_string(m.version),
                   checksumText(*store, m, drifted), printable(m.description)});
    }
    fmt::print("\n{}", applied.render());
  }
  if (drifted > 0) {
    fmt::print(
        "\n{} applied migration{} differ{} from this build's files "
        "(DRIFT): the database was changed by other means, or a "
        "migration file was edited after it was applied\n",
        drifted, drifted == 1 ? "" : "s", drifted == 1 ? "s" : "");
    return kSchemaDrift;
  }
  const std::vector<KnownMigration> pending = pendingMigrations(*store, state);
  if (state.version() > needed) {
    // The rolling-upgrade rule, as the library's initialize applies it: a
    // newer schema serves this build while its compatible_from allows.
    const int servesFrom =
        state.compatibleFrom > 0 ? state.compatibleFrom : state.version();
    if (servesFrom <= needed) {
      fmt::print(
          "\nusable: the database is newer than this build of dlmctl "
          "(version {} > {}) and still serves it (libraries built for "
          "schema version {} or later)\n",
          state.version(), needed, servesFrom);
      return kSchemaCurrent;
    }
    fmt::print(
        "\nthe database is newer than this build of dlmctl "
        "(version {} > {}) and no longer serves it (only libraries built "
        "for schema version {} or later): use a newer dlmctl\n",
        state.version(), needed, servesFrom);
    return kSchemaNewer;
  }
  if (pending.empty()) {
    fmt::print("\nup to date\n");
    return kSchemaCurrent;
  }
  fmt::print("\npending (dlmctl migrate applies them):\n");
  for (const KnownMigration& m : pending) {
    fmt::print("  {}\n", m.file);
  }
  return kSchemaPending;
}

namespace {

// `name` as a PGOPTIONS value: spaces and backslashes escaped (libpq splits
// the options at unescaped spaces).
std::string optionValue(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// --client-role and --admin-role, for this process's sessions (libpq reads
// PGOPTIONS when it connects): the settings the first migration reads.
void nameRoles(const MigrateOptions& options) {
  if (options.clientRole.empty() != options.adminRole.empty()) {
    throw UsageError("migrate: --client-role and --admin-role go together");
  }
  if (options.clientRole.empty()) return;
  const char* old = std::getenv("PGOPTIONS");
  const std::string value = fmt::format(
      "{}{}-c dlm.client_role={} -c dlm.admin_role={}", old ? old : "",
      old && *old ? " " : "", optionValue(options.clientRole),
      optionValue(options.adminRole));
  ::setenv("PGOPTIONS", value.c_str(), 1);
}

// Whether this process's sessions name both roles.
bool rolesNamed() {
  const char* options = std::getenv("PGOPTIONS");
  const std::string text = options ? options : "";
  return text.find("dlm.client_role=") != std::string::npos &&
         text.find("dlm.admin_role=") != std::string::npos;
}

// The migration that creates and records the roles (V3).
constexpr int kRolesVersion = 3;

}  // namespace

int runMigrate(const GlobalOptions& global, const MigrateOptions& options) {
  nameRoles(options);
  auto store = openCliStore(global);
  const SchemaState before = readState(*store);
  const std::vector<KnownMigration> pending = pendingMigrations(*store, before);
  // No role is made up: a first migration needs the DBA's names.
  if (store->name() == "postgres" && !options.dryRun && !pending.empty() &&
      before.version() < kRolesVersion && !rolesNamed()) {
    const std::string database = where(global, *store);
    store->close();
    throw UsageError(fmt::format(
        "migrate: {} has no dlm roles yet; name the applications' and the "
        "operators' roles: dlmctl migrate --client-role ROLE --admin-role "
        "ROLE (or PGOPTIONS='-c dlm.client_role=ROLE -c dlm.admin_role=ROLE'). "
        "Each is created NOLOGIN when missing (docs/dba.md)",
        database));
  }
  if (options.dryRun) {
    store->close();
    fmt::print("{}: schema at version {}\n", where(global, *store),
               before.version());
    if (pending.empty()) {
      fmt::print("nothing to apply\n");
    }
    for (const KnownMigration& m : pending) {
      fmt::print("would apply {}\n", m.file);
    }
    return 0;
  }
  // initialize(true) applies what is missing (serialised with other
  // migrators), then verifies the version: on success the schema is exactly
  // at this build's version.
  store->initialize(/*applyMigrations=*/true);
  const SchemaState after = readState(*store);
  store->close();
  // Another migrator may have applied some of `pending` meanwhile: name
  // only the versions that are new since `before`, as the database recorded
  // them.
  for (const AppliedMigration& m : after.applied) {
    if (m.version > before.version()) {
      fmt::print("applied V{} ({}) at {}\n", m.version,
                 printable(m.description), printable(m.appliedAt));
    }
  }
  fmt::print("{}: schema at version {}\n", where(global, *store),
             after.version());
  return 0;
}

}  // namespace dlm::cli
