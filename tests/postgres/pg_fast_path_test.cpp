// PostgreSQL-specific parts of migration V6: the one-statement fast path of
// dlm_try_acquire answers as the general path did (the conformance suite
// covers the behaviour both stores share), its side effects happen
// (expired SHARED holds taken over, the waiter's own request ended), and the
// rules the dropped CHECK constraints enforced still hold for every row the
// functions write.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "postgres/pg_client_role_support.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

class PgFastPathTest : public ::testing::Test {
 protected:
  PgFastPathTest() : store_(stores_.newStore()) {}

  // One value read as the schema owner.
  long long count(const std::string& sql) {
    pqxx::work tx(stores_.admin());
    const long long n = tx.exec1(sql)[0].as<long long>();
    tx.commit();
    return n;
  }

  // Rows of dlm_locks breaking a rule the V1 CHECK constraints enforced.
  long long rowsBreakingTheRules() {
    return count(fmt::format(
        "SELECT count(*) FROM {} WHERE status NOT IN ('FREE', 'HELD') "
        "OR (status = 'HELD' AND (token IS NULL OR expires_at IS NULL))",
        stores_.table("dlm_locks")));
  }

  // Rows of `table` for the key.
  long long rowsOf(const std::string& table, const StoreKey& k) {
    pqxx::work quote(stores_.admin());
    const std::string sql =
        fmt::format("SELECT count(*) FROM {} WHERE resource = {}",
                    stores_.table(table), quote.quote(k.key));
    quote.abort();
    return count(sql);
  }
  long long sharedHoldsOf(const StoreKey& k) {
    return rowsOf("dlm_shared_holds", k);
  }
  long long requestsOf(const StoreKey& k) {
    return rowsOf("dlm_lock_requests", k);
  }

  AcquireResult acquire(const StoreKey& k, const std::string& owner,
                        const std::string& token, LockMode mode,
                        std::chrono::milliseconds ttl = 30s) {
    const Holder holder{"test-host", 1};
    return store_->tryAcquire(
        AcquireRequest{k, owner, token, ttl, holder, mode});
  }

  // Sleeps past the lease of a hold of `ttl` taken just now.
  static void outlive(std::chrono::milliseconds ttl) {
    std::this_thread::sleep_for(ttl + 150ms);
  }

  ClientStores stores_;
  std::unique_ptr<PostgresStore> store_;
  const std::string scope_ = "DC#f#c#";
};

TEST_F(PgFastPathTest, ConstraintsAreGoneAndTheirRulesHoldForEveryWrite) {
  EXPECT_EQ(count(fmt::format(
                "SELECT count(*) FROM pg_constraint WHERE contype = 'c' AND "
                "conrelid = '{}'::regclass",
                stores_.table("dlm_locks"))),
            0);
  const auto x = LockMode::EXCLUSIVE;
  const auto s = LockMode::SHARED;
  const StoreKey a = pathKey(scope_, "a");
  const StoreKey ab = pathKey(scope_, "a.b");

  // Grant, retry, release, retried release.
  ASSERT_TRUE(acquire(a, "o1", "t1", x).acquired);
  ASSERT_TRUE(acquire(a, "o1", "t1", x).acquired);
  EXPECT_TRUE(store_->release(a, "t1", x));
  EXPECT_TRUE(store_->release(a, "t1", x));
  EXPECT_EQ(rowsBreakingTheRules(), 0);
  // An expired EXCLUSIVE hold taken over by SHARED (FREE, token gone), and
  // by EXCLUSIVE; a child under its parent's intention row.
  ASSERT_TRUE(acquire(a, "o1", "t2", x, 300ms).acquired);
  outlive(300ms);
  ASSERT_TRUE(acquire(a, "o2", "t3", s, 300ms).acquired);
  EXPECT_FALSE(store_->extend(a.key, "t2", 30s, x).has_value());
  outlive(300ms);
  ASSERT_TRUE(acquire(a, "o3", "t4", x).acquired);
  ASSERT_TRUE(store_->extend(a.key, "t4", 60s, x).has_value());
  EXPECT_TRUE(stores_.newAdminStore()->forceRelease(a.key));
  ASSERT_TRUE(acquire(ab, "o4", "t5", x).acquired);
  EXPECT_EQ(rowsBreakingTheRules(), 0);
}

TEST_F(PgFastPathTest, AnExclusiveGrantTakesOverExpiredSharedHolds) {
  const StoreKey k = pathKey(scope_, "doc");
  ASSERT_TRUE(acquire(k, "r1", "s1", LockMode::SHARED, 300ms).acquired);
  ASSERT_TRUE(acquire(k, "r2", "s2", LockMode::SHARED, 300ms).acquired);
  EXPECT_EQ(sharedHoldsOf(k), 2);
  outlive(300ms);
  const AcquireResult w = acquire(k, "w", "x1", LockMode::EXCLUSIVE);
  ASSERT_TRUE(w.acquired);
  EXPECT_EQ(w.fencingToken, 3);
  EXPECT_EQ(sharedHoldsOf(k), 0);
  EXPECT_FALSE(store_->release(k, "s1", LockMode::SHARED));
}

TEST_F(PgFastPathTest, AGrantEndsTheWaitersOwnRequest) {
  const StoreKey k = pathKey(scope_, "job");
  ASSERT_TRUE(waitAs(*store_, k, "me").deadlockCycle.empty());
  EXPECT_EQ(requestsOf(k), 1);
  const AcquireResult r = acquire(k, "me", "t1", LockMode::EXCLUSIVE);
  ASSERT_TRUE(r.acquired);
  EXPECT_EQ(requestsOf(k), 0);
  EXPECT_TRUE(store_->release(k, "t1", LockMode::EXCLUSIVE));
}

TEST_F(PgFastPathTest, RefusalsStillNameTheBlockerAndTheQueue) {
  const StoreKey parent = pathKey(scope_, "p");
  const StoreKey child = pathKey(scope_, "p.c");
  const StoreKey other = pathKey(scope_, "q");
  // A live descendant: the parent's own row is free, so the fast path's
  // UPDATE runs and matches nothing; the general path names the child.
  ASSERT_TRUE(acquire(child, "o1", "t1", LockMode::EXCLUSIVE).acquired);
  AcquireResult r = acquire(parent, "o2", "t2", LockMode::EXCLUSIVE);
  EXPECT_FALSE(r.acquired);
  EXPECT_EQ(r.blockedBy, child.key);
  EXPECT_FALSE(r.queued);
  // A live SHARED hold of the key itself.
  ASSERT_TRUE(acquire(other, "o3", "s1", LockMode::SHARED).acquired);
  r = acquire(other, "o4", "t3", LockMode::EXCLUSIVE);
  EXPECT_FALSE(r.acquired);
  EXPECT_EQ(r.blockedBy, other.key);
  // An earlier waiter: free key, refused as queued; its owner gets it.
  ASSERT_TRUE(store_->release(other, "s1", LockMode::SHARED));
  ASSERT_TRUE(waitAs(*store_, other, "early").deadlockCycle.empty());
  r = acquire(other, "late", "t4", LockMode::EXCLUSIVE);
  EXPECT_FALSE(r.acquired);
  EXPECT_TRUE(r.queued);
  EXPECT_EQ(r.blockedBy, other.key);
  EXPECT_TRUE(acquire(other, "early", "t5", LockMode::EXCLUSIVE).acquired);
}

TEST_F(PgFastPathTest, FencingTokensKeepRisingThroughBothPaths) {
  const StoreKey k = pathKey(scope_, "f");
  std::int64_t last = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string token = "t" + std::to_string(i);
    // Odd turns go through the general path (a SHARED grant), even ones
    // through the fast path.
    const LockMode mode = i % 2 ? LockMode::SHARED : LockMode::EXCLUSIVE;
    const AcquireResult r = acquire(k, "o", token, mode);
    ASSERT_TRUE(r.acquired) << i;
    EXPECT_GT(r.fencingToken, last) << i;
    last = r.fencingToken;
    ASSERT_TRUE(store_->release(k, token, mode)) << i;
  }
}

}  // namespace
}  // namespace dlm::test
