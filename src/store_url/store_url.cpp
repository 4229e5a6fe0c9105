#include "dlm/store_url.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "dlm/error.h"
#include "common/redact.h"

#ifdef DLM_WITH_POSTGRES
#include "dlm/postgres_store.h"
#include "postgres/pg_conninfo.h"
#include "postgres/pg_url.h"
#endif
#ifdef DLM_WITH_SQLITE
#include "dlm/sqlite_store.h"
#endif

namespace dlm {
namespace {

// Every refusal ends with this, so the user sees what would have worked.
constexpr const char* kForms =
    "a database is named by a postgresql:// (or postgres://) URI, a libpq "
    "keyword string such as \"host=db port=5432 dbname=app\", sqlite:PATH "
    "or sqlite::memory:";

bool startsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

[[noreturn]] void refuse(const std::string& why) {
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     fmt::format("{}; {}", why, kForms));
}

ParsedStoreUrl postgresUrl(const std::string& url) {
#ifdef DLM_WITH_POSTGRES
  try {
    return internal::parsePostgresUrl(url);
  } catch (const DLMException& e) {
    refuse(e.what());  // already redacted
  }
#else
  (void)url;
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     "this build of dlm has no PostgreSQL store "
                     "(configured with DLM_WITH_POSTGRES=OFF)");
#endif
}

// "mysql://...", "http://...": a URL, but of no database dlm supports.
std::string schemeOf(const std::string& url) {
  static const std::regex kScheme(R"(^([A-Za-z][A-Za-z0-9+.-]*)://)");
  std::smatch m;
  return std::regex_search(url, m, kScheme) ? m[1].str() : std::string();
}

}  // namespace

ParsedStoreUrl parseStoreUrl(const std::string& url) {
  // C APIs (sqlite3_open_v2, libpq) would stop at the NUL and open a
  // different file or server than the one named.
  if (url.find('\0') != std::string::npos) {
    refuse("the database URL contains a NUL byte");
  }
  if (url.empty()) return parseStoreUrl(defaultStoreUrl().url);
  if (startsWith(url, "postgresql://") || startsWith(url, "postgres://")) {
    return postgresUrl(url);
  }
  if (startsWith(url, "sqlite:")) {
    std::string path = url.substr(7);
    // Accept the URL-looking "sqlite:///abs/path" and "sqlite://rel" too.
    if (startsWith(path, "//")) path = path.substr(2);
    if (path.empty()) refuse("the SQLite URL 'sqlite:' names no file");
    ParsedStoreUrl parsed;
    parsed.kind = StoreKind::SQLITE;
    parsed.location = path;
    return parsed;
  }
  if (const std::string scheme = schemeOf(url); !scheme.empty()) {
    // Only the scheme is quoted: the rest may hold a password.
    refuse(fmt::format("unknown database URL scheme '{}://'", scheme));
  }
  // libpq's own test for a keyword string (recognized_connection_string):
  // it holds an '='. A file name never needs to look like one: it takes
  // the sqlite: prefix.
  if (url.find('=') != std::string::npos) return postgresUrl(url);
  const std::string shown = internal::redactSecrets(url);
  // A file name is the likely intent of a word without ':'; say how.
  refuse(url.find(':') == std::string::npos
             ? fmt::format("'{}' is not a database URL (a SQLite file takes "
                           "the prefix: sqlite:{})",
                           shown, shown)
             : fmt::format("'{}' is not a database URL", shown));
}

DefaultStoreUrl defaultStoreUrl() {
  // The application's own setting, as dlmctl reads it.
  if (const char* url = std::getenv("DLM_DATABASE_URL");
      url != nullptr && *url != '\0') {
    return {url, "DLM_DATABASE_URL"};
  }
  // The variables that name a server (PGPORT, PGUSER alone do not: they are
  // often set for other tools while the server is the local default).
  // A build without the PostgreSQL store keeps to its SQLite default.
#ifdef DLM_WITH_POSTGRES
  std::string origin;
  for (const char* name : {"PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    if (!origin.empty()) origin += ", ";
    origin += name;
  }
  if (!origin.empty()) return {"postgresql://", origin};
#endif
  return {kDefaultStoreUrl, "default"};
}

std::string describeStoreUrl(const std::string& url) {
  const ParsedStoreUrl parsed = parseStoreUrl(url);
  if (parsed.kind == StoreKind::POSTGRES) {
#ifdef DLM_WITH_POSTGRES
    return internal::describeConninfo(parsed.location);
#endif
  }
  if (parsed.location == ":memory:") return "sqlite::memory:";
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(parsed.location, ec);
  return "sqlite:" +
         (ec ? parsed.location : absolute.lexically_normal().string());
}

bool storeUrlHasPassword(const std::string& url) {
  const ParsedStoreUrl parsed = parseStoreUrl(url);
#ifdef DLM_WITH_POSTGRES
  if (parsed.kind == StoreKind::POSTGRES) {
    return internal::conninfoHasPassword(parsed.location);
  }
#endif
  return false;
}

std::shared_ptr<LockStore> openStore(const std::string& url,
                                     const std::string& postgresSchema) {
  const ParsedStoreUrl parsed = parseStoreUrl(url);
  if (parsed.kind == StoreKind::POSTGRES) {
#ifdef DLM_WITH_POSTGRES
    PostgresStoreOptions options;
    options.connection = parsed.location;
    options.schema = postgresSchema;
    options.poolerSafe = parsed.poolerSafe;
    options.listenConnection = parsed.listenConnection;
    options.synchronousReplication = parsed.synchronousReplication;
    return std::make_shared<PostgresStore>(options);
#endif
  }
  if (!postgresSchema.empty()) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("a PostgreSQL schema ('{}') was given for the SQLite "
                    "database '{}'",
                    postgresSchema, parsed.location));
  }
#ifdef DLM_WITH_SQLITE
  SqliteStoreOptions options;
  options.path = parsed.location;
  return std::make_shared<SqliteStore>(options);
#else
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     "this build of dlm has no SQLite store "
                     "(configured with DLM_WITH_SQLITE=OFF)");
#endif
}

}  // namespace dlm
