// The application's own connection to the database that holds the locks,
// for the examples whose writes go with a lock (guarded_workers.cpp,
// commit_lock.cpp). It is not part of dlm: it stands for whatever database
// code an application already has, and shows the one thing dlm needs from
// it, the open transaction wrapped in an adapter:
//   PostgreSQL: dlm::PostgresTransaction around a pqxx::work;
//   SQLite:     dlm::SqliteTransaction around a sqlite3* on the same file,
//               in a BEGIN IMMEDIATE transaction.
// One AppDb per thread. The SQL is written once for both databases, with
// parameters $1, $2, ... (SQLite reads them as named parameters "$1", ...).
#pragma once

#include <dlm/postgres_store.h>
#include <dlm/sqlite_store.h>
#include <dlm/store_url.h>
#include <sqlite3.h>

#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

class AppDb {
 public:
  // `url` in the forms dlm::openStore takes: the same database as the locks.
  explicit AppDb(const std::string& url) : where_(dlm::parseStoreUrl(url)) {
    if (where_.kind == dlm::StoreKind::POSTGRES) {
      pg_ = std::make_unique<pqxx::connection>(where_.location);  // "" = PG*
    } else {
      sqlite3* db = nullptr;
      const int rc = sqlite3_open(where_.location.c_str(), &db);
      sqlite_.reset(db);
      if (rc != SQLITE_OK) fail("open " + where_.location);
      sqlite3_busy_timeout(db, 10000);  // wait for other writers of the file
    }
  }

  // Opens the transaction that guardWithin / commitLock join.
  void begin() {
    if (pg_) {
      work_ = std::make_unique<pqxx::work>(*pg_);
      pgTx_.emplace(*work_);
    } else {
      run("BEGIN IMMEDIATE", {});  // the write lock now: nobody commits past us
      sqliteTx_.emplace(sqlite_.get());
    }
  }
  // The open transaction as dlm takes it.
  dlm::AppTransaction& transaction() {
    if (pgTx_) return *pgTx_;
    if (sqliteTx_) return *sqliteTx_;
    throw std::logic_error("AppDb: no transaction open");
  }
  // Runs a statement in the open transaction; returns the rows it changed.
  long long exec(const std::string& sql,
                 const std::vector<long long>& params = {}) {
    if (pg_) {
      return static_cast<long long>(
          work_->exec_params(sql, pqxx::prepare::make_dynamic_params(params))
              .affected_rows());
    }
    run(sql, params);
    return sqlite3_changes(sqlite_.get());
  }
  // The first column of the first row (0 when there is none).
  long long queryInt(const std::string& sql,
                     const std::vector<long long>& params = {}) {
    if (pg_) {
      const pqxx::result r =
          work_->exec_params(sql, pqxx::prepare::make_dynamic_params(params));
      return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<long long>();
    }
    return run(sql, params).value_or(0);
  }
  void commit() { finish(true); }
  void rollback() { finish(false); }

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
  };

  void finish(bool commit) {
    pgTx_.reset();
    sqliteTx_.reset();
    if (pg_) {
      auto work = std::move(work_);
      commit ? work->commit() : work->abort();
    } else if (commit) {
      run("COMMIT", {});  // fails if dlm rolled the transaction back
    } else if (!sqlite3_get_autocommit(sqlite_.get())) {
      run("ROLLBACK", {});
    }
  }

  // SQLite: one statement with its parameters; the first row's first column.
  std::optional<long long> run(const std::string& sql,
                               const std::vector<long long>& params) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(sqlite_.get(), sql.c_str(), -1, &stmt, nullptr) !=
        SQLITE_OK) {
      fail(sql);
    }
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> owned(
        stmt, sqlite3_finalize);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string name = "$" + std::to_string(i + 1);
      const int index = sqlite3_bind_parameter_index(stmt, name.c_str());
      if (index > 0) sqlite3_bind_int64(stmt, index, params[i]);
    }
    std::optional<long long> first;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (!first && sqlite3_column_type(stmt, 0) != SQLITE_NULL) {
        first = sqlite3_column_int64(stmt, 0);
      }
    }
    if (rc != SQLITE_DONE) fail(sql);
    return first;
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("SQLite: " + what + ": " +
                             sqlite3_errmsg(sqlite_.get()));
  }

  dlm::ParsedStoreUrl where_;
  std::unique_ptr<pqxx::connection> pg_;
  std::unique_ptr<pqxx::work> work_;
  std::optional<dlm::PostgresTransaction> pgTx_;
  std::unique_ptr<sqlite3, Closer> sqlite_;
  std::optional<dlm::SqliteTransaction> sqliteTx_;
};
