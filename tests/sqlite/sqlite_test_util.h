// Helpers for the SQLite-only tests: a temp directory per test, a raw sqlite3
// connection (to look at and interfere with the file from outside the store),
// and store keys and requests without the manager.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "dlm/lock_store.h"
#include "dlm/sqlite_store.h"
#include "support/test_keys.h"

namespace dlm::sqlite_test {

// A fresh directory per test, removed with its files.
class TempDir : public oracle::TempDir {
 public:
  TempDir() : oracle::TempDir("dlm-sqlite-test") {}
};

// A plain sqlite3 connection on a file. Failures throw std::runtime_error
// with SQLite's message (these are test failures, not store errors).
class RawDb {
 public:
  explicit RawDb(const std::string& path);

  sqlite3* handle() const { return db_.get(); }
  // Runs SQL text (several statements allowed).
  void exec(const std::string& sql);
  // Each row's columns as text (NULL as ""), joined by '|'.
  std::vector<std::string> rows(const std::string& sql);
  // The first column of the first row.
  std::string scalar(const std::string& sql);

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Closer> db_;
};

using test::pathKey;

// An initialized store (schema applied) on `path`.
std::unique_ptr<SqliteStore> openStore(
    const std::string& path,
    std::chrono::milliseconds busyTimeout = std::chrono::seconds(5));

// One tryAcquire with a fresh random token; the token is returned through
// `token` when given.
AcquireResult acquire(LockStore& store, const StoreKey& key,
                      std::chrono::milliseconds ttl = std::chrono::seconds(30),
                      std::string* token = nullptr,
                      const std::string& owner = "owner-1");

}  // namespace dlm::sqlite_test
