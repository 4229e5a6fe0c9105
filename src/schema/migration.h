// Migrations and schema files embedded into the library at build time
// (cmake/EmbedSql.cmake generates the definitions from schema/ and
// migrations/<store>/).
#pragma once

#include <string_view>
#include <vector>

namespace dlm::internal {

struct Migration {
  int version;            // n of V<n>__<what>.sql
  std::string_view file;  // "V1__create_lock_tables.sql"
  std::string_view sql;   // the file's text; records its own version row
};

// In version order.
const std::vector<Migration>& postgresMigrations();
const std::vector<Migration>& sqliteMigrations();

// schema/postgres.sql and schema/sqlite.sql.
std::string_view postgresSchemaSql();
std::string_view sqliteSchemaSql();

// The schema version this library needs: the newest migration's.
inline int latestVersion(const std::vector<Migration>& migrations) {
  return migrations.empty() ? 0 : migrations.back().version;
}

}  // namespace dlm::internal
