// Opening a store from a database URL, for programs that take the database
// as a setting (dlmctl's --db, DLM_DATABASE_URL, test worker processes).
#pragma once

#include <memory>
#include <string>

#include "dlm/export.h"
#include "dlm/lock_store.h"
#include "dlm/synchronous_replication.h"

namespace dlm {

// The forms a database URL takes (openStore, parseStoreUrl):
//   "postgresql://..." or "postgres://..."  a libpq URI;
//   a libpq keyword string ("host=db port=5432 dbname=orders");
//       both are checked with libpq's own parser and go to PostgresStore
//       as they are, so libpq's PG* variables fill in what they leave out
//       ("postgresql://" alone is all of PGHOST, PGDATABASE, ...);
//   "sqlite:<path>"  the SQLite file <path> ("sqlite:///abs/path" also
//       works); "sqlite::memory:" an in-memory database;
//   "" (empty)  the default, see defaultStoreUrl().
// Anything else (a bare file name, "mysql://...") is refused: a mistyped
// URL must not silently become a SQLite file of that name.
//
// A PostgreSQL URL may carry dlm's own parameters, taken out before libpq
// reads the rest: in a URI's query
//   "postgresql://app@pgbouncer:6432/orders?dlm_pooler_safe=true&dlm_listen_port=5432"
// or as keywords of a keyword string
//   "host=pgbouncer port=6432 dbname=orders dlm_pooler_safe=true
//   dlm_listen_port=5432". dlm_pooler_safe=true|false
//   PostgresStoreOptions::poolerSafe (also
//       1/0, on/off, yes/no);
//   dlm_listen_host=H, dlm_listen_port=P  PostgresStoreOptions::
//       listenConnection: the same string with its host and/or port
//       replaced (the server behind the pooler, for LISTEN);
//   dlm_synchronous_replication=not_checked|warn|required
//       PostgresStoreOptions::synchronousReplication.
// Any other dlm_* keyword, or a value not listed, is refused.
enum class StoreKind { POSTGRES, SQLITE };

struct DLM_API ParsedStoreUrl {
  StoreKind kind = StoreKind::SQLITE;
  // POSTGRES: the libpq connection string (the URL as given less dlm's own
  // parameters, "" for the PG* variables). SQLITE: the file path, or
  // ":memory:".
  std::string location;
  // POSTGRES only, from dlm's parameters (defaults when absent).
  bool poolerSafe = false;
  std::string listenConnection;  // "" = none given
  SynchronousReplication synchronousReplication =
      SynchronousReplication::NOT_CHECKED;
};

// Which form `url` is. Opens nothing, touches no file. Throws
// DLMException(INVALID_ARGUMENT), with a message naming the accepted forms
// and never a password, for: a form not listed above, a connection string
// libpq cannot parse, "sqlite:" without a path, a NUL byte anywhere (it
// would silently cut the path or string short), a PostgreSQL URL or
// keyword string in a build without the PostgreSQL store, an unknown dlm_*
// parameter or value.
DLM_API ParsedStoreUrl parseStoreUrl(const std::string& url);

// The database of a program that names none, and why it is that one.
struct DLM_API DefaultStoreUrl {
  std::string url;
  // "DLM_DATABASE_URL", "PGHOST", "PGHOST, PGDATABASE", ... or "default"
  // (the SQLite file).
  std::string origin;
};

// The same rule as dlmctl's: DLM_DATABASE_URL when it is set and not
// empty; else "postgresql://" (libpq reads PGHOST, PGPORT, PGUSER,
// PGDATABASE, ...) when any of PGHOST, PGHOSTADDR, PGDATABASE or PGSERVICE
// is set and not empty: they name a PostgreSQL server the way every libpq
// program reads them; else kDefaultStoreUrl, the embedded SQLite file.
// Reads the environment only.
DLM_API DefaultStoreUrl defaultStoreUrl();

// `url` for messages: "postgresql://user@host:port/dbname" (what libpq
// will use, its defaults filled in) or "sqlite:/absolute/path". Never
// contains a password. Throws like parseStoreUrl.
DLM_API std::string describeStoreUrl(const std::string& url);

// Whether `url` itself carries a password (a PostgreSQL keyword string's
// password=, a URI's user:password@ or ?password=); false for SQLite and
// for a password libpq would find elsewhere (PGPASSWORD, ~/.pgpass). For
// tools that take a URL on their command line, where every local user can
// read it. Throws like parseStoreUrl.
DLM_API bool storeUrlHasPassword(const std::string& url);

// A new, not yet initialized store for `url` (see the forms above).
// `postgresSchema` names the schema holding dlm's tables ("" = the role's
// search_path); it must be empty for SQLite. Opens no connection and
// creates no file: the first call on the store (usually initialize())
// does; for SQLite that creates the file if missing.
// Throws DLMException(INVALID_ARGUMENT) as parseStoreUrl does, for a
// schema given for SQLite, or a store this build does not include
// (DLM_WITH_POSTGRES / DLM_WITH_SQLITE off). Messages never contain a
// password.
DLM_API std::shared_ptr<LockStore> openStore(const std::string& url,
                                     const std::string& postgresSchema = "");

// The embedded default when no PG* variable names a server:
// "sqlite:dlm.sqlite" (in the working directory).
inline constexpr const char* kDefaultStoreUrl = "sqlite:dlm.sqlite";

}  // namespace dlm
