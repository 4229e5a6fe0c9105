// PostgresStore::guardWithin and commitLock on an application transaction
// held by a plain libpq connection (dlm::LibpqTransaction), as an
// application without libpqxx has it: the cases of pg_commit_lock_test.cpp
// again, and the connection states the adapter must refuse. Run as a
// dlm_client-only role on an application connection whose search_path does
// not name dlm's schema. (tests/conformance runs the manager-level suites
// of both calls on this adapter too: conformance_libpq.)
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_client_role_support.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

struct LibpqFinish {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct LibpqClear {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using LibpqResult = std::unique_ptr<PGresult, LibpqClear>;

// Runs `sql` on `conn`; its result, whatever its status.
LibpqResult libpqExec(PGconn* conn, const std::string& sql,
                      const std::vector<const char*>& params = {}) {
  return LibpqResult(PQexecParams(conn, sql.c_str(),
                                  static_cast<int>(params.size()), nullptr,
                                  params.data(), nullptr, nullptr, 0));
}

// Runs `sql`, failing the test unless it succeeds; its command status
// ("COMMIT", or "ROLLBACK" for the COMMIT of a failed transaction).
std::string libpqRun(PGconn* conn, const std::string& sql,
                     const std::vector<const char*>& params = {}) {
  const LibpqResult r = libpqExec(conn, sql, params);
  const ExecStatusType status = PQresultStatus(r.get());
  EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
      << sql << ": " << PQerrorMessage(conn);
  return PQcmdStatus(r.get());
}

// The one value `sql` returns on `conn`.
std::string libpqValue(PGconn* conn, const std::string& sql) {
  const LibpqResult r = libpqExec(conn, sql);
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    ADD_FAILURE() << sql << ": " << PQerrorMessage(conn);
    return "";
  }
  return PQgetvalue(r.get(), 0, 0);
}

class LibpqTransactionTest : public ::testing::Test {
 protected:
  LibpqTransactionTest() : store_(stores_.newStore()) {
    // The application's own table, in a schema of its own that the client
    // role may write.
    pqxx::connection& admin = stores_.admin();
    const std::string s = admin.quote_name(app_.name());
    const std::string role = admin.quote_name(stores_.role());
    execSql(admin,
            fmt::format("CREATE TABLE {}.orders (id text PRIMARY KEY)", s));
    execSql(admin, fmt::format("GRANT USAGE ON SCHEMA {} TO {}", s, role));
    execSql(admin,
            fmt::format("GRANT SELECT, INSERT ON {}.orders TO {}", s, role));
    orders_ = s + ".orders";
    conn_ = connect();
  }

  std::unique_ptr<PGconn, LibpqFinish> connect() {
    std::unique_ptr<PGconn, LibpqFinish> conn(
        PQconnectdb(stores_.conninfo().c_str()));
    EXPECT_EQ(PQstatus(conn.get()), CONNECTION_OK)
        << PQerrorMessage(conn.get());
    return conn;
  }

  PGconn* app() { return conn_.get(); }

  // Rows in the application's table with this id, as the admin sees them.
  int orderRows(const std::string& id) {
    pqxx::nontransaction tx(stores_.admin());
    return tx
        .exec_params1("SELECT count(*) FROM " + orders_ + " WHERE id = $1",
                      id)[0]
        .as<int>();
  }

  void insertOrder(const std::string& id) {
    libpqRun(app(), "INSERT INTO " + orders_ + " (id) VALUES ($1)",
             {id.c_str()});
  }

  void commitLock(PGconn* conn, const StoreKey& key, const std::string& token,
                  LockMode mode = LockMode::EXCLUSIVE) {
    LibpqTransaction adapter(conn);
    store_->commitLock(adapter, key, token, mode);
  }
  void guardWithin(PGconn* conn, const StoreKey& key, const std::string& token,
                   LockMode mode = LockMode::EXCLUSIVE) {
    LibpqTransaction adapter(conn);
    store_->guardWithin(adapter, key, token, mode);
  }

  // Waits until the store's clock has passed `at`.
  void waitPast(StoreTime at) {
    ASSERT_TRUE(eventually([&] { return store_->now() > at; }));
  }

  ClientStores stores_;
  FreshSchema app_;
  std::unique_ptr<PostgresStore> store_;
  std::string orders_;
  std::unique_ptr<PGconn, LibpqFinish> conn_;
};

TEST_F(LibpqTransactionTest, CommitOfTheApplicationTransactionFreesTheLock) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o1");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  libpqRun(app(), "BEGIN");
  // The application's search_path does not reach dlm's schema.
  EXPECT_EQ(libpqValue(app(), "SHOW search_path"), "\"$user\", public");
  insertOrder("o1");
  commitLock(app(), key, "tok-1");
  // Not yet committed: everyone else still sees it held.
  EXPECT_TRUE(store_->describe(key.key)->held);
  // Still the application's open transaction; nothing left behind on its
  // connection: no setting, no prepared statement.
  EXPECT_EQ(PQtransactionStatus(app()), PQTRANS_INTRANS);
  EXPECT_EQ(libpqValue(app(), "SHOW search_path"), "\"$user\", public");
  EXPECT_EQ(libpqValue(app(), "SELECT count(*) FROM pg_prepared_statements"),
            "0");
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_FALSE(store_->describe(key.key)->held);
  EXPECT_EQ(orderRows("o1"), 1);
  EXPECT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);
}

TEST_F(LibpqTransactionTest,
       RollbackOfTheApplicationTransactionKeepsTheLockHeld) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o2");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  libpqRun(app(), "BEGIN");
  insertOrder("o2");
  commitLock(app(), key, "tok-1");
  libpqRun(app(), "ROLLBACK");
  EXPECT_EQ(orderRows("o2"), 0);
  const auto record = store_->describe(key.key);
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->held);
  EXPECT_EQ(record->owner, store_->listedOwner("owner-a"));
  // rollbackLock then releases it in a transaction of the store's own.
  EXPECT_TRUE(store_->release(key, "tok-1", LockMode::EXCLUSIVE));
  EXPECT_FALSE(store_->describe(key.key)->held);
}

TEST_F(LibpqTransactionTest,
       TakenOverLockIsLockNotHeldAndTheApplicationWorkDoesNotCommit) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o3");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 200ms);
  ASSERT_TRUE(first.acquired);
  waitPast(first.expiresAt);
  ASSERT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);

  libpqRun(app(), "BEGIN");
  insertOrder("o3");
  const DLMException e = errorOf([&] { commitLock(app(), key, "tok-1"); });
  EXPECT_EQ(e.code(), ErrorCode::LOCK_NOT_HELD) << e.what();
  EXPECT_FALSE(e.transient());
  EXPECT_NE(std::string(e.what()).find(key.key), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("DLM01"), std::string::npos) << e.what();
  // The raise failed the application's transaction: its COMMIT rolls back
  // (libpq says so in the command status, not with an error).
  EXPECT_EQ(PQtransactionStatus(app()), PQTRANS_INERROR);
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "ROLLBACK");
  EXPECT_EQ(orderRows("o3"), 0);
  // The new holder is untouched.
  const auto record = store_->describe(key.key);
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->held);
  EXPECT_EQ(record->owner, store_->listedOwner("owner-b"));
  EXPECT_EQ(record->fencingToken, 2);
  // The application's connection is usable for its next transaction.
  libpqRun(app(), "BEGIN");
  insertOrder("o3-retry");
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_EQ(orderRows("o3-retry"), 1);
}

TEST_F(LibpqTransactionTest, ExpiredButUntakenLockIsStillReleasedWithin) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o4");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 100ms);
  ASSERT_TRUE(first.acquired);
  waitPast(first.expiresAt);
  libpqRun(app(), "BEGIN");
  insertOrder("o4");
  commitLock(app(), key, "tok-1");
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_EQ(orderRows("o4"), 1);
  EXPECT_FALSE(store_->describe(key.key)->statusHeld);
}

TEST_F(LibpqTransactionTest, AGuardKeepsATakeoverWaitingUntilTheCommit) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o5");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 300ms);
  ASSERT_TRUE(first.acquired);
  libpqRun(app(), "BEGIN");
  guardWithin(app(), key, "tok-1");
  EXPECT_EQ(PQtransactionStatus(app()), PQTRANS_INTRANS);
  waitPast(first.expiresAt);
  // The lease has ended, but the guarded transaction is open: the takeover
  // waits for its row lock (rowLockWait) and gives up.
  EXPECT_FALSE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);
  insertOrder("o5");
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_EQ(orderRows("o5"), 1);
  // The guard is gone with its transaction: the expired lease is taken.
  EXPECT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);
}

TEST_F(LibpqTransactionTest, AGuardAfterTheLeaseWasLostRefusesTheWrite) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o6");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 100ms);
  ASSERT_TRUE(first.acquired);
  waitPast(first.expiresAt);
  ASSERT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);
  libpqRun(app(), "BEGIN");
  const DLMException e = errorOf([&] { guardWithin(app(), key, "tok-1"); });
  EXPECT_EQ(e.code(), ErrorCode::LOCK_NOT_HELD) << e.what();
  EXPECT_NE(std::string(e.what()).find("guardWithin"), std::string::npos)
      << e.what();
  // The paused holder's write that follows is refused by the database.
  const LibpqResult write =
      libpqExec(app(), "INSERT INTO " + orders_ + " (id) VALUES ('o6')");
  EXPECT_EQ(PQresultStatus(write.get()), PGRES_FATAL_ERROR);
  EXPECT_STREQ(PQresultErrorField(write.get(), PG_DIAG_SQLSTATE), "25P02");
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "ROLLBACK");
  EXPECT_EQ(orderRows("o6"), 0);
}

TEST_F(LibpqTransactionTest, ASharedHoldIsGuardedAndReleasedWithin) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o7");
  const Holder holder{"test-host", 1};
  ASSERT_TRUE(store_
                  ->tryAcquire(AcquireRequest{key, "reader", "tok-r", 30s,
                                              holder, LockMode::SHARED})
                  .acquired);
  libpqRun(app(), "BEGIN");
  guardWithin(app(), key, "tok-r", LockMode::SHARED);
  // A guard checks the mode it is given: the SHARED hold is no EXCLUSIVE one.
  libpqRun(app(), "SAVEPOINT s");
  EXPECT_EQ(codeOf([&] { guardWithin(app(), key, "tok-r"); }),
            ErrorCode::LOCK_NOT_HELD);
  libpqRun(app(), "ROLLBACK TO SAVEPOINT s");
  commitLock(app(), key, "tok-r", LockMode::SHARED);
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_TRUE(store_->holdersOf(key.key).empty());
}

TEST_F(LibpqTransactionTest, WorksOnAConnectionInNonblockingMode) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o8");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  libpqRun(app(), "BEGIN");
  ASSERT_EQ(PQsetnonblocking(app(), 1), 0);
  guardWithin(app(), key, "tok-1");
  commitLock(app(), key, "tok-1");
  EXPECT_EQ(PQisnonblocking(app()), 1) << "the application's setting stays";
  ASSERT_EQ(PQsetnonblocking(app(), 0), 0);
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_FALSE(store_->describe(key.key)->held);
}

class NotALibpqTransaction final : public AppTransaction {};

// Each refusal sends nothing: the lock stays held, and a commitLock outside
// a transaction does not release it in autocommit.
TEST_F(LibpqTransactionTest, ConnectionsNotIdleInATransactionAreRefused) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o9");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  const auto bothRefused = [&](PGconn* conn) {
    const DLMException guard =
        errorOf([&] { guardWithin(conn, key, "tok-1"); });
    const DLMException release =
        errorOf([&] { commitLock(conn, key, "tok-1"); });
    EXPECT_EQ(release.code(), guard.code()) << release.what();
    return guard;
  };

  NotALibpqTransaction other;
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(other, key, "tok-1", LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(bothRefused(nullptr).code(), ErrorCode::INVALID_ARGUMENT);

  // No transaction: commitLock would otherwise release at once.
  const DLMException idle = bothRefused(app());
  EXPECT_EQ(idle.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(idle.what()).find("BEGIN"), std::string::npos)
      << idle.what();

  // A transaction that failed already.
  libpqRun(app(), "BEGIN");
  EXPECT_EQ(PQresultStatus(libpqExec(app(), "SELECT 1/0").get()),
            PGRES_FATAL_ERROR);
  EXPECT_EQ(bothRefused(app()).code(), ErrorCode::INVALID_ARGUMENT);
  libpqRun(app(), "ROLLBACK");

  // A command in progress: its results are still the application's to read.
  libpqRun(app(), "BEGIN");
  ASSERT_EQ(PQsendQuery(app(), "SELECT 42"), 1);
  EXPECT_EQ(bothRefused(app()).code(), ErrorCode::INVALID_ARGUMENT);
  {
    const LibpqResult mine(PQgetResult(app()));
    ASSERT_EQ(PQresultStatus(mine.get()), PGRES_TUPLES_OK);
    EXPECT_STREQ(PQgetvalue(mine.get(), 0, 0), "42");
    EXPECT_EQ(PQgetResult(app()), nullptr);
  }
  libpqRun(app(), "ROLLBACK");

  // Pipeline mode.
  ASSERT_EQ(PQenterPipelineMode(app()), 1);
  EXPECT_EQ(bothRefused(app()).code(), ErrorCode::INVALID_ARGUMENT);
  ASSERT_EQ(PQexitPipelineMode(app()), 1);

  EXPECT_TRUE(store_->describe(key.key)->held);
  EXPECT_EQ(orderRows("o9"), 0);
}

TEST_F(LibpqTransactionTest, ABrokenConnectionIsAConnectionError) {
  const StoreKey key = pathKey("XDC#lq#", "orders.o10");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  libpqRun(app(), "BEGIN");
  const std::string pid = std::to_string(PQbackendPID(app()));
  execSql(stores_.admin(), "SELECT pg_terminate_backend(" + pid + ")");
  // libpq learns of it from the statement.
  const DLMException during =
      errorOf([&] { guardWithin(app(), key, "tok-1"); });
  EXPECT_EQ(during.code(), ErrorCode::CONNECTION_ERROR) << during.what();
  EXPECT_TRUE(during.transient());
  // And now knows before sending anything.
  EXPECT_EQ(PQstatus(app()), CONNECTION_BAD);
  const DLMException after = errorOf([&] { commitLock(app(), key, "tok-1"); });
  EXPECT_EQ(after.code(), ErrorCode::CONNECTION_ERROR) << after.what();
  EXPECT_TRUE(store_->describe(key.key)->held);
}

TEST_F(LibpqTransactionTest,
       StoreWithoutASchemaFindsTheFunctionOnItsSearchPath) {
  // The store names no schema; its role's sessions find dlm's by search_path.
  PostgresStoreOptions options;
  options.connection = stores_.conninfo(
      fmt::format("options='-c search_path={}'", stores_.schema().name()));
  PostgresStore store(options);
  store.initialize(false);
  const StoreKey key = pathKey("XDC#lq#", "orders.o11");
  ASSERT_TRUE(acquireAs(store, key, "owner-a", "tok-1").acquired);
  libpqRun(app(), "BEGIN");
  LibpqTransaction adapter(app());
  store.guardWithin(adapter, key, "tok-1", LockMode::EXCLUSIVE);
  store.commitLock(adapter, key, "tok-1", LockMode::EXCLUSIVE);
  EXPECT_EQ(libpqRun(app(), "COMMIT"), "COMMIT");
  EXPECT_FALSE(store.describe(key.key)->held);
}

}  // namespace
}  // namespace dlm::test
