// PostgresStore::commitLock: the release as part of the application's own
// transaction (commitLock), run as a dlm_client-only role on an application
// connection whose search_path does not name dlm's schema.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <string>

#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_client_role_support.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

class ReleaseWithinTest : public ::testing::Test {
 protected:
  ReleaseWithinTest() : store_(stores_.newStore()) {
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
    app_conn_ = std::make_unique<pqxx::connection>(stores_.conninfo());
  }

  // Rows in the application's table with this id, as the admin sees them.
  int orderRows(const std::string& id) {
    pqxx::nontransaction tx(stores_.admin());
    return tx
        .exec_params1("SELECT count(*) FROM " + orders_ + " WHERE id = $1",
                      id)[0]
        .as<int>();
  }

  void insertOrder(pqxx::transaction_base& tx, const std::string& id) {
    tx.exec_params("INSERT INTO " + orders_ + " (id) VALUES ($1)", id);
  }

  // Waits until the store's clock has passed `at`.
  void waitPast(StoreTime at) {
    ASSERT_TRUE(eventually([&] { return store_->now() > at; }));
  }

  ClientStores stores_;
  FreshSchema app_;
  std::unique_ptr<PostgresStore> store_;
  std::string orders_;
  std::unique_ptr<pqxx::connection> app_conn_;
};

TEST_F(ReleaseWithinTest, CommitOfTheApplicationTransactionFreesTheLock) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o1");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  {
    pqxx::work tx(*app_conn_);
    // The application's search_path does not reach dlm's schema.
    EXPECT_EQ(tx.exec("SHOW search_path")[0][0].as<std::string>(),
              "\"$user\", public");
    insertOrder(tx, "o1");
    commitLockTx(*store_, tx, key, "tok-1");
    // Not yet committed: everyone else still sees it held (an acquirer
    // would wait for the row lock until the application's transaction ends).
    EXPECT_TRUE(store_->describe(key.key)->held);
    // The function's own search_path did not leak into the application's
    // transaction.
    EXPECT_EQ(tx.exec("SHOW search_path")[0][0].as<std::string>(),
              "\"$user\", public");
    tx.commit();
  }
  EXPECT_FALSE(store_->describe(key.key)->held);
  EXPECT_EQ(orderRows("o1"), 1);
  EXPECT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);
}

TEST_F(ReleaseWithinTest, RollbackOfTheApplicationTransactionKeepsTheLockHeld) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o2");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  {
    pqxx::work tx(*app_conn_);
    insertOrder(tx, "o2");
    commitLockTx(*store_, tx, key, "tok-1");
    tx.abort();
  }
  EXPECT_EQ(orderRows("o2"), 0);
  const auto record = store_->describe(key.key);
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->held);
  EXPECT_EQ(record->owner, store_->listedOwner("owner-a"));
  // rollbackLock then releases it in a transaction of the store's own.
  EXPECT_TRUE(store_->release(key, "tok-1", dlm::LockMode::EXCLUSIVE));
  EXPECT_FALSE(store_->describe(key.key)->held);
}

TEST_F(ReleaseWithinTest,
       TakenOverLockIsLockNotHeldAndTheApplicationWorkDoesNotCommit) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o3");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 200ms);
  ASSERT_TRUE(first.acquired);
  waitPast(first.expiresAt);
  ASSERT_TRUE(acquireAs(*store_, key, "owner-b", "tok-2").acquired);

  pqxx::work tx(*app_conn_);
  insertOrder(tx, "o3");
  const DLMException e =
      errorOf([&] { commitLockTx(*store_, tx, key, "tok-1"); });
  EXPECT_EQ(e.code(), ErrorCode::LOCK_NOT_HELD) << e.what();
  EXPECT_FALSE(e.transient());
  EXPECT_NE(std::string(e.what()).find(key.key), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("DLM01"), std::string::npos) << e.what();
  // The raise aborted the application's transaction, and the store made
  // libpqxx see that: commit() throws instead of returning normally after
  // a silent server-side rollback, so an application that ignored the
  // exception still cannot believe its work committed.
  EXPECT_THROW(tx.commit(), pqxx::usage_error);
  EXPECT_EQ(orderRows("o3"), 0);
  // The new holder is untouched.
  const auto record = store_->describe(key.key);
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->held);
  EXPECT_EQ(record->owner, store_->listedOwner("owner-b"));
  EXPECT_EQ(record->fencingToken, 2);
  // The application's connection is usable for its next transaction.
  pqxx::work next(*app_conn_);
  insertOrder(next, "o3-retry");
  next.commit();
  EXPECT_EQ(orderRows("o3-retry"), 1);
}

TEST_F(ReleaseWithinTest, ReleasedOrForceReleasedLockIsLockNotHeld) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o4");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  ASSERT_TRUE(stores_.newAdminStore()->forceRelease(key.key));
  pqxx::work tx(*app_conn_);
  EXPECT_EQ(codeOf([&] { commitLockTx(*store_, tx, key, "tok-1"); }),
            ErrorCode::LOCK_NOT_HELD);
}

TEST_F(ReleaseWithinTest, ExpiredButUntakenLockIsStillReleasedWithin) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o5");
  const AcquireResult first =
      acquireAs(*store_, key, "owner-a", "tok-1", 100ms);
  ASSERT_TRUE(first.acquired);
  waitPast(first.expiresAt);
  pqxx::work tx(*app_conn_);
  insertOrder(tx, "o5");
  commitLockTx(*store_, tx, key, "tok-1");
  tx.commit();
  EXPECT_EQ(orderRows("o5"), 1);
  EXPECT_FALSE(store_->describe(key.key)->statusHeld);
}

class NotAPostgresTransaction final : public AppTransaction {};

TEST_F(ReleaseWithinTest, OtherAdaptersAndAutocommitAreInvalid) {
  const StoreKey key = pathKey("XDC#rw#", "orders.o6");
  ASSERT_TRUE(acquireAs(*store_, key, "owner-a", "tok-1").acquired);
  NotAPostgresTransaction other;
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(other, key, "tok-1", dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  {
    // Autocommit: there is no transaction to be part of.
    pqxx::nontransaction tx(*app_conn_);
    EXPECT_EQ(codeOf([&] { commitLockTx(*store_, tx, key, "tok-1"); }),
              ErrorCode::INVALID_ARGUMENT);
  }
  // (A pqxx::work that was already committed is not detected: libpqxx 6.4
  // runs exec_params on it in autocommit; see PostgresStore::commitLock.)
  // None of it touched the lock.
  EXPECT_TRUE(store_->describe(key.key)->held);
}

TEST_F(ReleaseWithinTest, StoreWithoutASchemaFindsTheFunctionOnItsSearchPath) {
  // The store names no schema; its role's sessions find dlm's by search_path.
  PostgresStoreOptions options;
  options.connection = stores_.conninfo(
      fmt::format("options='-c search_path={}'", stores_.schema().name()));
  PostgresStore store(options);
  store.initialize(false);
  const StoreKey key = pathKey("XDC#rw#", "orders.o7");
  ASSERT_TRUE(acquireAs(store, key, "owner-a", "tok-1").acquired);
  pqxx::work tx(*app_conn_);
  commitLockTx(store, tx, key, "tok-1");
  tx.commit();
  EXPECT_FALSE(store.describe(key.key)->held);
}

}  // namespace
}  // namespace dlm::test
