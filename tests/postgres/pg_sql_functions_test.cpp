// What callers of dlm's SQL functions see beyond the store contract
// (tests/store_contract): a schema-4 caller of the old function signatures
// beside shared holds and fair queueing (migration V5), what the application
// role may read of shared holds, and the functions' own argument checks.
#include <gtest/gtest.h>

#include <string>

#include "postgres/pg_client_role_support.h"
#include "support/error_code.h"
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

  // Runs `sql` logged in as the application role (the same login as
  // store_, so the same tenant) with the schema on its search_path: what a
  // process of the previous release (schema 4) sends.
  pqxx::result asClient(const std::string& sql) {
    if (!client_) {
      client_ = std::make_unique<pqxx::connection>(stores_.conninfo());
    }
    pqxx::work tx(*client_);
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
  std::unique_ptr<pqxx::connection> client_;
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

TEST_F(PgSharedTest, ANegativeWaitIsAnInvalidArgumentNotASilentRow) {
  EXPECT_EQ(codeOf([&] { waitAs(*store_, pathKey(scope_, "k"), "A", -1ms); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(store_->listWaiters(scope_).empty());
}

}  // namespace
}  // namespace dlm::test
