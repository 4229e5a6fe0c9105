// Opening a store from a database URL, for programs that take the database
// as a setting (dlmctl's --db, DLM_DATABASE_URL, test worker processes).
#pragma once

#include <memory>
#include <string>

#include "dlm/lock_store.h"

namespace dlm {

// A new, not yet initialized store for `url`:
//   "postgresql://..." or "postgres://..."  PostgresStore; the whole URL is
//       the libpq connection string, so libpq's PG* variables fill in what it
//       leaves out ("postgresql://app@" takes host, port and database from
//       the environment). `postgresSchema` names the schema holding dlm's
//       tables ("" = the role's search_path).
//   "sqlite:<path>"  SqliteStore on the file <path> (created if missing).
//   "" (empty)       SqliteStore on the embedded default file "dlm.sqlite" in
//       the working directory.
//   any other string without a "<scheme>://" prefix  a SQLite file path.
// Opens no connection: the first call on the store (usually initialize())
// does. `postgresSchema` must be empty for SQLite.
// Throws DLMException(INVALID_ARGUMENT) for an unknown scheme
// ("mysql://..."), an empty SQLite path, a schema given for SQLite, or a store
// this build does not include (DLM_WITH_POSTGRES / DLM_WITH_SQLITE off).
std::shared_ptr<LockStore> openStore(const std::string& url,
                                     const std::string& postgresSchema = "");

// The URL openStore uses when none is given: "sqlite:dlm.sqlite".
inline constexpr const char* kDefaultStoreUrl = "sqlite:dlm.sqlite";

}  // namespace dlm
