#include "postgres/schema_locator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "postgres/pg_conn.h"

namespace dlm::internal {
namespace {

// "a", "b" and "c" as prose.
std::string quotedList(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += "\"" + names[i] + "\"";
  }
  return out;
}

std::string useFound(const SchemaSearch& s) {
  const std::string where =
      s.asked.empty()
          ? std::string("none is on this login's search_path")
          : fmt::format("schema \"{}\" has none", s.asked);
  const char* split =
      "Do not apply dlm's schema anywhere else: a second schema is a second, "
      "independent set of locks, and services using different ones do not "
      "exclude each other";
  if (s.found.size() > 1) {
    return fmt::format(
        "found dlm schemas {} in database \"{}\" ({}): name the one the "
        "services use (PostgresStoreOptions::schema, dlmctl --schema NAME, "
        "or the login's search_path; ask the DBA which). {}",
        quotedList(s.found), s.database, where, split);
  }
  const std::string& only = s.found.front();
  const std::string shell = quoteIdentifierForShell(only);
  return fmt::format(
      "found dlm schema \"{}\" in database \"{}\" ({}): use it: "
      "PostgresStoreOptions::schema = \"{}\", dlmctl --schema {}, or the "
      "login's search_path (ALTER ROLE <login> SET search_path = {}). {}",
      only, s.database, where, only, shell, shell, split);
}

std::string createOne(const SchemaSearch& s) {
  const std::string schema = s.asked.empty() ? "dlm" : s.asked;
  const std::string quoted = quoteIdentifierForShell(schema);
  return fmt::format(
      "database \"{}\" has no dlm schema at all; as the database's owner, "
      "create one and apply dlm's schema to it:  psql -q -v ON_ERROR_STOP=1 "
      "-1 -d {} -c 'CREATE SCHEMA {}' -c 'SET search_path = {}' -f "
      "/usr/share/dlm/schema/postgres.sql  (package dlm-schema; "
      "schema/postgres.sql in the sources), or  dlmctl --db URL --schema {} "
      "migrate; then let the application's login use it "
      "(PostgresStoreOptions::schema = \"{}\" or ALTER ROLE <login> SET "
      "search_path = {}): docs/dba.md",
      s.database, s.database, quoted, quoted, quoted, schema, quoted);
}

}  // namespace

SchemaSearch searchDlmSchemas(PgConn& conn, Deadline deadline,
                              const std::string& asked) {
  // One row with a NULL name when there is none.
  const PgResult r = conn.exec(
      "SELECT current_database(), s.nspname FROM (SELECT 1) AS one "
      "LEFT JOIN (SELECT n.nspname FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "WHERE c.relname = 'dlm_schema_version' AND c.relkind IN ('r', 'p')) "
      "AS s ON true ORDER BY s.nspname COLLATE \"C\"",
      deadline);
  SchemaSearch search;
  search.asked = asked;
  search.looked = true;
  for (int row = 0; row < r.rows(); ++row) {
    search.database = r.text(row, 0);
    if (!r.isNull(row, 1)) search.found.push_back(r.text(row, 1));
  }
  return search;
}

std::string schemaAdvice(const SchemaSearch& search) {
  if (!search.looked) {
    return "could not look for dlm's tables in this database; find the "
           "schema that holds them (psql: \\dt *.dlm_schema_version) and "
           "name it (PostgresStoreOptions::schema, dlmctl --schema) before "
           "applying dlm's schema anywhere: a second schema is a second, "
           "independent set of locks";
  }
  return search.found.empty() ? createOne(search) : useFound(search);
}

std::string quoteIdentifierForShell(const std::string& name) {
  const bool plain =
      !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) ||
                        name[0] == '_') &&
      std::all_of(name.begin(), name.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      });
  if (plain) return name;
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    if (c == '\'') {
      quoted += "'\\''";  // ends the shell quote, an escaped ', reopens it
      continue;
    }
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace dlm::internal
