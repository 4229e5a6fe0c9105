#include "support/test_stores.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "support/random_token.h"

#ifdef DLM_WITH_POSTGRES
#include <libpq-fe.h>

#include "dlm/lock_store_wrapper.h"
#include "dlm/postgres_store.h"
#include "support/pg_test_support.h"
#include "support/pgbouncer_support.h"
#endif
#ifdef DLM_WITH_SQLITE
#include <sqlite3.h>

#include "dlm/sqlite_store.h"
#endif

namespace dlm::test {
namespace {

#ifdef DLM_WITH_SQLITE
void sqliteExec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(sql + ": " + message);
  }
}

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using SqliteHandle = std::unique_ptr<sqlite3, SqliteCloser>;

SqliteHandle openSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open(path.c_str(), &db);
  SqliteHandle handle(db);
  if (rc != SQLITE_OK) throw std::runtime_error("cannot open " + path);
  sqlite3_busy_timeout(db, 5000);
  return handle;
}

class SqliteAppSession final : public AppSession {
 public:
  explicit SqliteAppSession(const std::string& path)
      : db_(openSqlite(path)), adapter_(db_.get()) {
    sqliteExec(db_.get(), "BEGIN IMMEDIATE");
  }
  ~SqliteAppSession() override {
    if (sqlite3_get_autocommit(db_.get()) == 0) {
      sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }
  AppTransaction& adapter() override { return adapter_; }
  void write(const std::string& marker) override {
    sqlite3_stmt* raw = nullptr;
    if (sqlite3_prepare_v2(db_.get(), "INSERT INTO app_work VALUES (?1)", -1,
                           &raw, nullptr) != SQLITE_OK) {
      throw std::runtime_error(sqlite3_errmsg(db_.get()));
    }
    sqlite3_bind_text(raw, 1, marker.data(), static_cast<int>(marker.size()),
                      SQLITE_TRANSIENT);
    const int rc = sqlite3_step(raw);
    sqlite3_finalize(raw);
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db_.get()));
  }
  void commit() override { sqliteExec(db_.get(), "COMMIT"); }
  void rollback() override { sqliteExec(db_.get(), "ROLLBACK"); }

 private:
  SqliteHandle db_;
  SqliteTransaction adapter_;
};

class SqliteEnvironment final : public StoreEnvironment {
 public:
  SqliteEnvironment() : dir_("dlm-test"), path_(dir_.file("locks.sqlite")) {
    newStore();  // applies the schema once
  }

  std::string name() const override { return "sqlite"; }
  std::shared_ptr<LockStore> newStore() override {
    SqliteStoreOptions options{path_};
    options.busyTimeout = kTestStoreBudget;
    auto store = std::make_shared<SqliteStore>(options);
    store->initialize(/*applyMigrations=*/true);
    return store;
  }
  std::shared_ptr<LockStore> newEmptyStore() override {
    const std::string path = dir_.file(uniqueName("empty") + ".sqlite");
    return std::make_shared<SqliteStore>(SqliteStoreOptions{path});
  }
  std::string url() const override { return "sqlite:" + path_; }
  std::string postgresSchema() const override { return ""; }
  std::unique_ptr<AppSession> beginAppTransaction() override {
    sqliteExec(openSqlite(path_).get(),
               "CREATE TABLE IF NOT EXISTS app_work (marker TEXT)");
    return std::make_unique<SqliteAppSession>(path_);
  }
  bool appRowExists(const std::string& marker) override {
    SqliteHandle db = openSqlite(path_);
    sqliteExec(db.get(), "CREATE TABLE IF NOT EXISTS app_work (marker TEXT)");
    sqlite3_stmt* raw = nullptr;
    sqlite3_prepare_v2(db.get(), "SELECT 1 FROM app_work WHERE marker = ?1", -1,
                       &raw, nullptr);
    sqlite3_bind_text(raw, 1, marker.data(), static_cast<int>(marker.size()),
                      SQLITE_TRANSIENT);
    const bool found = sqlite3_step(raw) == SQLITE_ROW;
    sqlite3_finalize(raw);
    return found;
  }

 private:
  oracle::TempDir dir_;
  std::string path_;
};
#endif

#ifdef DLM_WITH_POSTGRES
class PostgresAppSession final : public AppSession {
 public:
  PostgresAppSession(const std::string& conninfo, std::string table)
      : conn_(conninfo),
        tx_(std::make_unique<pqxx::work>(conn_)),
        adapter_(*tx_),
        table_(std::move(table)) {}
  AppTransaction& adapter() override { return adapter_; }
  void write(const std::string& marker) override {
    tx_->exec_params("INSERT INTO " + table_ + " VALUES ($1)", marker);
  }
  void commit() override { tx_->commit(); }
  void rollback() override { tx_->abort(); }

 private:
  pqxx::connection conn_;
  std::unique_ptr<pqxx::work> tx_;
  PostgresTransaction adapter_;
  std::string table_;
};

// The same on a plain libpq connection (LibpqTransaction), as an
// application without libpqxx has it.
class LibpqAppSession final : public AppSession {
 public:
  LibpqAppSession(const std::string& conninfo, std::string table)
      : conn_(PQconnectdb(conninfo.c_str())),
        adapter_(conn_.get()),
        table_(std::move(table)) {
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      throw std::runtime_error(std::string("libpq connection: ") +
                               PQerrorMessage(conn_.get()));
    }
    run("BEGIN", {});
  }
  AppTransaction& adapter() override { return adapter_; }
  void write(const std::string& marker) override {
    run("INSERT INTO " + table_ + " VALUES ($1)", {marker.c_str()});
  }
  // A COMMIT of a failed transaction rolls back, which libpq reports as
  // success with command status ROLLBACK.
  void commit() override {
    if (run("COMMIT", {}) != "COMMIT") {
      throw std::runtime_error(
          "COMMIT rolled back: the transaction had failed");
    }
  }
  void rollback() override { run("ROLLBACK", {}); }

 private:
  struct Finish {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
  };
  // Runs `sql`; its command status, or throws with the server's message.
  std::string run(const std::string& sql,
                  const std::vector<const char*>& params) {
    const std::unique_ptr<PGresult, Clear> r(
        PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()),
                     nullptr, params.data(), nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK &&
        PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      throw std::runtime_error(sql + ": " + PQerrorMessage(conn_.get()));
    }
    return PQcmdStatus(r.get());
  }

  std::unique_ptr<PGconn, Finish> conn_;  // closing it rolls back
  LibpqTransaction adapter_;
  std::string table_;
};

// The application's store (client role) with the operator calls
// (forceRelease, purgeIdle, cancelRequests, bindClient, unbindClient,
// purgeClient) made through a second store logged in with the
// admin role, as an operator's tool would.
class ClientStoreWithAdmin final : public LockStoreWrapper {
 public:
  ClientStoreWithAdmin(std::shared_ptr<LockStore> client,
                       std::shared_ptr<LockStore> admin)
      : LockStoreWrapper(std::move(client)), admin_(std::move(admin)) {}
  bool forceRelease(std::string_view key) override {
    return adminOf(*admin_).forceRelease(key);
  }
  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) override {
    return adminOf(*admin_).purgeIdle(idleFor, batchSize, dryRun);
  }
  int cancelRequests(std::string_view key,
                     std::optional<std::string_view> owner) override {
    return adminOf(*admin_).cancelRequests(key, owner);
  }
  void bindClient(std::string_view clientId, std::string_view role) override {
    adminOf(*admin_).bindClient(clientId, role);
  }
  bool unbindClient(std::string_view clientId) override {
    return adminOf(*admin_).unbindClient(clientId);
  }
  ClientPurge purgeClient(std::string_view clientId) override {
    return adminOf(*admin_).purgeClient(clientId);
  }
  ClientPurge rebindClient(std::string_view clientId,
                           std::string_view role) override {
    return adminOf(*admin_).rebindClient(clientId, role);
  }
  void close() override {
    LockStoreWrapper::close();
    admin_->close();
  }

 private:
  std::shared_ptr<LockStore> admin_;
};

// A fresh schema at the newest version (MigratedSchema: schema/postgres.sql
// applied by the schema owner), used through a login role that has only
// dlm_client: a privilege the library needs but the schema does not grant
// fails the suite. Only the operator calls go through a dlm_admin login.
//
// Pooled: the stores connect through PgBouncer (transaction pooling) in
// pooler-safe mode and listen for releases on a direct connection.
// Libpq: the application's transactions are on plain libpq connections
// (LibpqTransaction) instead of libpqxx ones.
class PostgresEnvironment final : public StoreEnvironment {
 public:
  explicit PostgresEnvironment(bool pooled, bool libpqApp = false)
      : pooled_(pooled),
        libpqApp_(libpqApp),
        role_(schema_.admin()),
        adminRole_(schema_.admin()) {
    if (pooled_) {
      allowThroughPgbouncer(role_.name());
      allowThroughPgbouncer(adminRole_.name());
    }
  }

  std::string name() const override { return "postgres"; }
  std::shared_ptr<LockStore> newStore() override {
    auto store = std::make_shared<PostgresStore>(storeOptions(role_.name()));
    store->initialize(/*applyMigrations=*/false);
    auto admin =
        std::make_shared<PostgresStore>(storeOptions(adminRole_.name()));
    return std::make_shared<ClientStoreWithAdmin>(std::move(store),
                                                  std::move(admin));
  }
  std::shared_ptr<LockStore> newEmptyStore() override {
    empty_.push_back(std::make_unique<FreshSchema>());
    return std::make_shared<PostgresStore>(empty_.back()->options());
  }
  // libpq fills what the URI leaves out (host, port, database) from PG*.
  // Pooled: PgBouncer's address with dlm's parameters for pooler-safe mode
  // and a direct LISTEN connection (the PG* server).
  std::string url() const override {
    if (!pooled_) return fmt::format("postgresql://{}@", role_.name());
    return pgbouncerUrl(role_.name());
  }
  std::string postgresSchema() const override { return schema_.name(); }
  std::unique_ptr<AppSession> beginAppTransaction() override {
    const std::string conninfo = fmt::format("user={}", role_.name());
    if (libpqApp_) {
      return std::make_unique<LibpqAppSession>(conninfo, appTable());
    }
    return std::make_unique<PostgresAppSession>(conninfo, appTable());
  }
  bool appRowExists(const std::string& marker) override {
    pqxx::work tx(schema_.admin());
    return !tx.exec_params("SELECT 1 FROM " + appTable() + " WHERE marker = $1",
                           marker)
                .empty();
  }

 private:
  // The application's own table, in dlm's schema but always named with it.
  std::string appTable() {
    if (!appTableMade_) {
      pqxx::connection& admin = schema_.admin();
      const std::string table = admin.quote_name(schema_.name()) + ".app_work";
      execSql(admin, "CREATE TABLE " + table + " (marker text)");
      execSql(admin, "GRANT SELECT, INSERT ON " + table + " TO " +
                         admin.quote_name(role_.name()));
      appTableMade_ = true;
    }
    return schema_.admin().quote_name(schema_.name()) + ".app_work";
  }
  bool appTableMade_ = false;

  PostgresStoreOptions storeOptions(const std::string& user) const {
    const std::string direct = fmt::format("user={}", user);
    PostgresStoreOptions o = schema_.options(direct);
    if (pooled_) {
      o = schema_.options(pgbouncerConninfo(user));
      o.poolerSafe = true;
      o.listenConnection = direct;
    }
    o.operationTimeout = kTestStoreBudget;
    return o;
  }

  const bool pooled_;
  const bool libpqApp_;
  MigratedSchema schema_;
  ClientRole role_;      // needs dlm_client, which the schema creates
  AdminRole adminRole_;  // needs dlm_admin, likewise
  std::vector<std::unique_ptr<FreshSchema>> empty_;
};
#endif

}  // namespace

std::string uniqueName(const std::string& prefix) {
  return fmt::format("{}_{}_{}", prefix, getpid(),
                     test::randomToken().substr(0, 8));
}

std::unique_ptr<StoreEnvironment> makeSqliteEnvironment() {
#ifdef DLM_WITH_SQLITE
  return std::make_unique<SqliteEnvironment>();
#else
  throw std::runtime_error("built without the SQLite store");
#endif
}

std::unique_ptr<StoreEnvironment> makePostgresEnvironment() {
#ifdef DLM_WITH_POSTGRES
  // Throws when the server named by PG* cannot be reached (adminConnection).
  return std::make_unique<PostgresEnvironment>(/*pooled=*/false);
#else
  throw std::runtime_error("built without the PostgreSQL store");
#endif
}

std::unique_ptr<StoreEnvironment> makeEnvironment(const std::string& name) {
  if (name == "sqlite") return makeSqliteEnvironment();
  if (name == "postgres") return makePostgresEnvironment();
#ifdef DLM_WITH_POSTGRES
  if (name == "pgbouncer") {
    return std::make_unique<PostgresEnvironment>(/*pooled=*/true);
  }
  if (name == "libpq") {
    return std::make_unique<PostgresEnvironment>(/*pooled=*/false,
                                                 /*libpqApp=*/true);
  }
#endif
  throw std::invalid_argument("unknown store " + name);
}

std::vector<std::string> compiledStores() {
  std::vector<std::string> names;
#ifdef DLM_WITH_SQLITE
  names.push_back("sqlite");
#endif
#ifdef DLM_WITH_POSTGRES
  names.push_back("postgres");
#endif
  return names;
}

std::vector<std::string> conformanceStores() {
  std::vector<std::string> names = compiledStores();
#ifdef DLM_WITH_POSTGRES
  names.push_back("pgbouncer");
#endif
  return names;
}

std::vector<std::string> appTransactionStores() {
  std::vector<std::string> names = conformanceStores();
#ifdef DLM_WITH_POSTGRES
  names.push_back("libpq");
#endif
  return names;
}

}  // namespace dlm::test
