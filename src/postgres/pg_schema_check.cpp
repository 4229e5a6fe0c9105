// PostgresStore: initialize, close, and where and which the schema is.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "postgres/owner_digest.h"
#include "postgres/pg_app_transaction.h"
#include "postgres/pg_array.h"
#include "postgres/pg_conninfo.h"
#include "postgres/pg_migrate.h"
#include "postgres/pg_replication.h"
#include "postgres/pg_results.h"
#include "postgres/pg_statements.h"
#include "postgres/pg_store_impl.h"
#include "postgres/schema_locator.h"
#include "schema/schema_compat.h"

namespace dlm {

using internal::Params;
using internal::PgConn;
using internal::PgResult;

void PostgresStore::Impl::initialize(bool applyMigrations) {
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

void PostgresStore::Impl::close() {
  releases_.close();
  pool_.close();
}

std::string PostgresStore::Impl::howToApplySchema() {
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

SchemaState PostgresStore::Impl::readSchemaState(std::string_view op) {
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

std::string PostgresStore::Impl::functionSchema() {
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

}  // namespace dlm
