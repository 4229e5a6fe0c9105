#include "sqlite_test_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <stdexcept>

#include "support/random_token.h"

namespace dlm::sqlite_test {

RawDb::RawDb(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  db_.reset(raw);
  if (rc != SQLITE_OK) {
    throw std::runtime_error("opening " + path + ": " + sqlite3_errstr(rc));
  }
}

void RawDb::exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &error) !=
      SQLITE_OK) {
    std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(sql + ": " + message);
  }
}

std::vector<std::string> RawDb::rows(const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &raw, nullptr) !=
      SQLITE_OK) {
    throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_.get()));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw,
                                                             &sqlite3_finalize);
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    std::string row;
    for (int i = 0; i < sqlite3_column_count(stmt.get()); ++i) {
      if (i > 0) row += '|';
      const auto* text =
          reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), i));
      if (text != nullptr) {
        row.append(text, static_cast<std::size_t>(
                             sqlite3_column_bytes(stmt.get(), i)));
      }
    }
    out.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) {
    throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_.get()));
  }
  return out;
}

std::string RawDb::scalar(const std::string& sql) {
  const auto all = rows(sql);
  if (all.empty()) throw std::runtime_error(sql + ": no rows");
  return all.front();
}

std::unique_ptr<SqliteStore> openStore(const std::string& path,
                                       std::chrono::milliseconds busyTimeout) {
  SqliteStoreOptions options;
  options.path = path;
  options.busyTimeout = busyTimeout;
  auto store = std::make_unique<SqliteStore>(options);
  store->initialize(/*applyMigrations=*/true);
  return store;
}

AcquireResult acquire(LockStore& store, const StoreKey& key,
                      std::chrono::milliseconds ttl, std::string* token,
                      const std::string& owner) {
  const std::string fresh = test::randomToken();
  if (token != nullptr) *token = fresh;
  const Holder holder{"test-host", static_cast<std::int64_t>(getpid())};
  return store.tryAcquire(AcquireRequest{key, owner, fresh, ttl, holder});
}

}  // namespace dlm::sqlite_test
