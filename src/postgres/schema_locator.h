// Where dlm's tables are in a database, and what to tell someone whose
// store does not see them. The advice must be safe to follow literally: a
// second dlm schema beside an existing one is a second, independent set of
// locks, so creating one is suggested only when the database has none.
#pragma once

#include <string>
#include <vector>

#include "dlm/deadline.h"

namespace dlm::internal {

class PgConn;

struct SchemaSearch {
  std::string database;              // current_database(), or a placeholder
  std::string asked;                 // PostgresStoreOptions::schema ("" = search_path)
  std::vector<std::string> found;    // the dlm schemas of the database
  bool looked = false;               // false: the lookup itself failed
};

// The search for `asked`, in one statement: the connection's database and
// its schemas that hold a dlm_schema_version table, in name order
// (pg_catalog is readable by every login, so this finds them whether or not
// the login may use them).
SchemaSearch searchDlmSchemas(PgConn& conn, Deadline deadline,
                              const std::string& asked);

// What to do about a store that finds no dlm schema where it looks:
// use the schemas found (naming them), or, only when the database has
// none, how to create one (in `asked`, else in a schema named "dlm",
// never "public" by default).
std::string schemaAdvice(const SchemaSearch& search);

// `name` as an SQL identifier inside a single-quoted shell argument:
// double-quoted unless it is a plain lower-case one.
std::string quoteIdentifierForShell(const std::string& name);

}  // namespace dlm::internal
