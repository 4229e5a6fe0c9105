#include "dlm/store_url.h"

#include <fmt/format.h>

#include "dlm/error.h"

#ifdef DLM_WITH_POSTGRES
#include "dlm/postgres_store.h"
#endif
#ifdef DLM_WITH_SQLITE
#include "dlm/sqlite_store.h"
#endif

namespace dlm {
namespace {

bool startsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::shared_ptr<LockStore> openPostgres(const std::string& url,
                                        const std::string& schema) {
#ifdef DLM_WITH_POSTGRES
  PostgresStoreOptions options;
  options.connection = url;
  options.schema = schema;
  return std::make_shared<PostgresStore>(options);
#else
  (void)url;
  (void)schema;
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     "this build of dlm has no PostgreSQL store "
                     "(configured with DLM_WITH_POSTGRES=OFF)");
#endif
}

std::shared_ptr<LockStore> openSqlite(const std::string& path,
                                      const std::string& schema) {
  if (path.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "the SQLite URL 'sqlite:' names no file");
  }
  if (!schema.empty()) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("a PostgreSQL schema ('{}') was given for the SQLite "
                    "database '{}'",
                    schema, path));
  }
#ifdef DLM_WITH_SQLITE
  SqliteStoreOptions options;
  options.path = path;
  return std::make_shared<SqliteStore>(options);
#else
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     "this build of dlm has no SQLite store "
                     "(configured with DLM_WITH_SQLITE=OFF)");
#endif
}

}  // namespace

std::shared_ptr<LockStore> openStore(const std::string& url,
                                     const std::string& postgresSchema) {
  if (startsWith(url, "postgresql://") || startsWith(url, "postgres://")) {
    return openPostgres(url, postgresSchema);
  }
  if (url.empty()) return openSqlite("dlm.sqlite", postgresSchema);
  if (startsWith(url, "sqlite:")) {
    std::string path = url.substr(7);
    // Accept the URL-looking "sqlite:///abs/path" and "sqlite://rel" too.
    if (startsWith(path, "//")) path = path.substr(2);
    return openSqlite(path, postgresSchema);
  }
  // Anything else with a scheme is a typo or a database we do not support;
  // treating it as a file name would silently create a stray SQLite file.
  if (url.find("://") != std::string::npos) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("unknown database URL scheme in '{}' (expected "
                    "postgresql://..., sqlite:<path> or a file path)",
                    url));
  }
  return openSqlite(url, postgresSchema);
}

}  // namespace dlm
