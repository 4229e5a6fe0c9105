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

// The schemas of the connection's database that hold a dlm_schema_version
// table, in name order (pg_catalog is readable by every login, so this
// finds them whether or not the login may use them).
std::vector<std::string> dlmSchemasIn(PgConn& conn, Deadline deadline);

struct SchemaSearch {
  std::string database;              // current_database(), or a placeholder
  std::string asked;                 // PostgresStoreOptions::schema ("" = search_path)
  std::vector<std::string> found;    // dlmSchemasIn
  bool looked = false;               // false: the lookup itself failed
};

// What to do about a store that finds no dlm schema where it looks:
// use the schemas found (naming them), or, only when the database has
// none, how to create one (in `asked`, else in a schema named "dlm",
// never "public" by default).
std::string schemaAdvice(const SchemaSearch& search);

// `name` as an SQL identifier inside a single-quoted shell argument:
// double-quoted unless it is a plain lower-case one.
std::string quoteIdentifierForShell(const std::string& name);

}  // namespace dlm::internal
