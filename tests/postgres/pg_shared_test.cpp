// PostgreSQL-specific parts of shared locks and fair queueing (migration
// V5): what a schema-4 caller of the old function signatures sees, what the
// application role may read, takeover and purge of shared holds at the row
// level. The behaviour both stores share is in tests/conformance.
#include <gtest/gtest.h>

#include <string>

#include "postgres/pg_client_role_support.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

AcquireResult acquireShared(LockStore& store, const StoreKey& key,
                            const std::string& owner, const std::string& token,
                            std::chrono::milliseconds ttl = 30s) {
  const Holder holder{"test-host", 1};
  return store.tryAcquire(
      AcquireRequest{key, owner, token, ttl, holder, LockMode::SHARED});
}

class PgSharedTest : public ::testing::Test {
 protected:
  PgSharedTest() : store_(stores_.newStore()) {}

  // Runs `sql` as the application role with the schema on its search_path:
  // what a process of the previous release (schema 4) sends.
  pqxx::result asClient(const std::string& sql) {
    pqxx::work tx(stores_.admin());
    tx.exec("SET LOCAL ROLE " + tx.quote_name(stores_.role()));
    tx.exec("SET LOCAL search_path = " +
            tx.quote_name(stores_.schema().name()));
    pqxx::result r = tx.exec(sql);
    tx.commit();
    return r;
  }

  // The 9-argument dlm_acquire of schema 4 for a one-segment key.
  pqxx::result oldAcquire(const StoreKey& k, const std::string& owner,
                          const std::string& token) {
    pqxx::work quote(stores_.admin());
    const std::string sql = fmt::format(
        "SELECT acquired, blocked_by FROM dlm_acquire(ARRAY[{}], ARRAY[1::"
        "bigint], {}, {}, {}, {}, 30000, 'old-host', 7)",
        quote.quote(k.key), quote.quote(k.descendantsBegin),
        quote.quote(k.descendantsEnd), quote.quote(owner), quote.quote(token));
    quote.abort();
    return asClient(sql);
  }

  ClientStores stores_;
  std::unique_ptr<PostgresStore> store_;
  const std::string scope_ = "DC#f#c#";
};

TEST_F(PgSharedTest, TheSchema4AcquireRespectsSharedHoldsAndTheQueue) {
  const StoreKey k = pathKey(scope_, "doc");
  ASSERT_TRUE(acquireShared(*store_, k, "reader", "r1").acquired);
  pqxx::result r = oldAcquire(k, "old-writer", "w1");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0][0].as<bool>());
  EXPECT_EQ(r[0][1].as<std::string>(), k.key);

  // Free again, but a new-library writer waits: the old caller queues too.
  ASSERT_TRUE(store_->release(k, "r1", LockMode::SHARED));
  ASSERT_TRUE(acquireShared(*store_, k, "reader", "r2").acquired);
  ASSERT_TRUE(waitAs(*store_, k, "new-writer").deadlockCycle.empty());
  ASSERT_TRUE(store_->release(k, "r2", LockMode::SHARED));
  r = oldAcquire(k, "old-writer", "w2");
  EXPECT_FALSE(r[0][0].as<bool>());
  store_->unregisterWait(k.key, "new-writer");
  r = oldAcquire(k, "old-writer", "w3");
  EXPECT_TRUE(r[0][0].as<bool>());
  // And the new library sees the old caller's exclusive hold.
  EXPECT_FALSE(acquireShared(*store_, k, "reader", "r3").acquired);
}

TEST_F(PgSharedTest, TheSchema4RegisterWaitRecordsAnExclusiveRequest) {
  const StoreKey k = pathKey(scope_, "doc");
  asClient(fmt::format(
      "SELECT dlm_register_wait('{}', '{{}}', '{}', '{}', 'old-waiter', "
      "30000)",
      k.key, k.descendantsBegin, k.descendantsEnd));
  const auto waiters = store_->listWaiters(scope_);
  ASSERT_EQ(waiters.size(), 1u);
  EXPECT_EQ(waiters[0].mode, LockMode::EXCLUSIVE);
  // An exclusive request holds back a new reader.
  const AcquireResult refused = acquireShared(*store_, k, "reader", "r1");
  EXPECT_FALSE(refused.acquired);
  EXPECT_TRUE(refused.queued);
}

TEST_F(PgSharedTest, TheApplicationRoleCannotReadSharedHoldsOrTheirTokens) {
  const StoreKey k = pathKey(scope_, "doc");
  ASSERT_TRUE(acquireShared(*store_, k, "reader", "secret-token").acquired);
  EXPECT_THROW(asClient("SELECT token FROM dlm_shared_holds"),
               pqxx::insufficient_privilege);
  const pqxx::result holds =
      asClient("SELECT * FROM dlm_holders('" + scope_ + "', false)");
  ASSERT_EQ(holds.size(), 1u);
  for (const auto& field : holds[0]) {
    EXPECT_STRNE(field.name(), "token");
    if (!field.is_null()) {
      EXPECT_EQ(std::string(field.c_str()).find("secret-token"),
                std::string::npos);
    }
  }
}

TEST_F(PgSharedTest, ASharedAcquireTakesOverAnExpiredExclusiveHolder) {
  const StoreKey k = pathKey(scope_, "doc");
  ASSERT_TRUE(acquireAs(*store_, k, "writer", "w1", 50ms).acquired);
  EXPECT_TRUE(eventually(
      [&] { return acquireShared(*store_, k, "reader", "r1").acquired; }));
  // The expired writer lost the key: no extension, no release.
  EXPECT_FALSE(store_->extend(k.key, "w1", 30s, LockMode::EXCLUSIVE));
  EXPECT_FALSE(store_->release(k, "w1", LockMode::EXCLUSIVE));
  const auto holders = store_->holdersOf(k.key);
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].mode, LockMode::SHARED);
  EXPECT_EQ(holders[0].owner, "reader");
}

TEST_F(PgSharedTest, ARetriedSharedAcquireWithItsTokenChangesNothing) {
  const StoreKey k = pathKey(scope_, "doc");
  const AcquireResult first = acquireShared(*store_, k, "reader", "r1");
  const AcquireResult again = acquireShared(*store_, k, "reader", "r1");
  ASSERT_TRUE(first.acquired);
  ASSERT_TRUE(again.acquired);
  EXPECT_EQ(again.fencingToken, first.fencingToken);
  EXPECT_EQ(store_->holdersOf(k.key).size(), 1u);
}

TEST_F(PgSharedTest, PurgeDeletesStaleSharedHoldsAndTokensStillGrow) {
  const StoreKey k = pathKey(scope_, "doc");
  const AcquireResult first = acquireShared(*store_, k, "reader", "r1", 20ms);
  ASSERT_TRUE(first.acquired);
  const StoreKey live = pathKey(scope_, "live");
  ASSERT_TRUE(acquireShared(*store_, live, "reader", "r2").acquired);
  auto admin = stores_.newAdminStore();
  EXPECT_TRUE(eventually([&] {
    return admin->purgeIdle(10ms, 100, /*dryRun=*/false).rows == 0 &&
           store_->holdersOf(k.key).empty();
  }));
  // The live hold and its key stay.
  EXPECT_EQ(store_->holdersOf(live.key).size(), 1u);
  // A purged key's next token is above every token it issued.
  const AcquireResult next = acquireShared(*store_, k, "reader", "r3");
  ASSERT_TRUE(next.acquired);
  EXPECT_GT(next.fencingToken, first.fencingToken);
}

}  // namespace
}  // namespace dlm::test
