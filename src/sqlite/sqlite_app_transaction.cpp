#include "sqlite/sqlite_app_transaction.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <memory>

#include "dlm/error.h"
#include "dlm/sqlite_store.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {
namespace {

[[noreturn]] void invalidTransaction(std::string_view call,
                                     const std::string& path,
                                     std::string_view why) {
  throw DLMException(
      ErrorCode::INVALID_ARGUMENT,
      fmt::format("sqlite store '{}': {} needs {}", path, call, why));
}

struct AppStatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
using AppStatement = std::unique_ptr<sqlite3_stmt, AppStatementFinalizer>;

// Prepared and finalized per call: the handle is not ours to keep statements
// on. Binds key (?1), token (?2) and, when the statement has it, now (?3).
AppStatement prepare(sqlite3* db, const std::string& path, const char* sql,
                     std::string_view key, std::string_view token,
                     std::int64_t nowMs, std::string_view what) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql, -1, &raw, nullptr);
  AppStatement stmt(raw);
  if (rc != SQLITE_OK) {
    throwError(db, path, rc, fmt::format("preparing {}", what), {});
  }
  rc = sqlite3_bind_text64(stmt.get(), 1, key.data(), key.size(),
                           SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc == SQLITE_OK) {
    rc = sqlite3_bind_text64(stmt.get(), 2, token.data(), token.size(),
                             SQLITE_TRANSIENT, SQLITE_UTF8);
  }
  if (rc == SQLITE_OK && sqlite3_bind_parameter_count(stmt.get()) >= 3) {
    rc = sqlite3_bind_int64(stmt.get(), 3, nowMs);
  }
  if (rc != SQLITE_OK) {
    throwError(db, path, rc, fmt::format("binding {}", what), {});
  }
  return stmt;
}

}  // namespace

sqlite3* appConnection(AppTransaction& tx, std::string_view call,
                       const std::string& path, const std::string& storeFile) {
  auto* app = dynamic_cast<SqliteTransaction*>(&tx);
  if (app == nullptr) {
    invalidTransaction(call, path,
                       "a dlm::SqliteTransaction (the application's "
                       "transaction belongs to another kind of store)");
  }
  sqlite3* db = app->handle();
  if (db == nullptr) {
    invalidTransaction(call, path, "a sqlite3 connection, not null");
  }
  // Autocommit mode means no BEGIN is open: a statement would commit (or
  // read) on its own, outside the application's work.
  if (sqlite3_get_autocommit(db) != 0) {
    invalidTransaction(call, path,
                       "an open transaction on the application's connection "
                       "(BEGIN IMMEDIATE first)");
  }
  // The statement must reach the store's own file, whatever path spelling
  // either side used.
  const std::string appFile = canonicalFile(db);
  if (appFile != storeFile) {
    invalidTransaction(
        call, path,
        fmt::format("a connection to the store's file '{}', not to '{}'",
                    storeFile,
                    appFile.empty() ? "an in-memory database" : appFile));
  }
  return db;
}

bool releaseOnAppConnection(sqlite3* db, const std::string& path,
                            std::string_view key, std::string_view token,
                            LockMode mode, std::int64_t nowMs) {
  // Held means status HELD with this token (expired but not taken over
  // counts, as for release); a row already FREE was force-released and is
  // no longer protecting anything either.
  static const char kRelease[] =
      "UPDATE dlm_locks SET status = 'FREE', "
      "expires_at_ms = min(expires_at_ms, ?3) "
      "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'";
  // A SHARED hold is its own row: deleted, if this token still has it.
  static const char kReleaseShared[] =
      "DELETE FROM dlm_shared_holds WHERE resource = ?1 AND token = ?2";
  const AppStatement stmt =
      prepare(db, path, mode == LockMode::SHARED ? kReleaseShared : kRelease,
              key, token, nowMs, "the release in the application's transaction");
  const int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_DONE) {
    throwError(db, path, rc, "releasing the lock in the application's transaction",
               {});
  }
  return sqlite3_changes(db) > 0;
}

bool holdsOnAppConnection(sqlite3* db, const std::string& path,
                          std::string_view key, std::string_view token,
                          LockMode mode, std::int64_t nowMs) {
  static const char kHolds[] =
      "SELECT 1 FROM dlm_locks WHERE resource = ?1 AND token = ?2 "
      "AND status = 'HELD' AND expires_at_ms > ?3";
  static const char kHoldsShared[] =
      "SELECT 1 FROM dlm_shared_holds WHERE resource = ?1 AND token = ?2 "
      "AND expires_at_ms > ?3";
  const AppStatement stmt =
      prepare(db, path, mode == LockMode::SHARED ? kHoldsShared : kHolds, key,
              token, nowMs, "the guard in the application's transaction");
  const int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    throwError(db, path, rc, "checking the lock in the application's transaction",
               {});
  }
  return rc == SQLITE_ROW;
}

void refuseAppTransaction(sqlite3* db, const std::string& path,
                          std::string_view key, std::string_view why) {
  const int rollback = sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  std::string tail;
  if (rollback != SQLITE_OK && sqlite3_get_autocommit(db) == 0) {
    tail = fmt::format(
        "; rolling the application's transaction back failed too ({}): do "
        "not commit it",
        sqlite3_errmsg(db));
  } else {
    tail = "; the application's transaction was rolled back";
  }
  throw DLMException(ErrorCode::LOCK_NOT_HELD,
                     fmt::format("sqlite store '{}': lock '{}' is no longer "
                                 "held by this acquisition ({}){}",
                                 path, key, why, tail));
}

}  // namespace dlm::internal::sqlite
