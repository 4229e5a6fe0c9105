// What operators read: describe, holdersOf, listHeld and listWaiters (by
// prefix, in key order, expired holds included and marked), and the
// operator's forceRelease.
#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Listing = StoreContract;

TEST_P(Listing, DescribeShowsTheRowAndNothingForAKeyNeverLocked) {
  EXPECT_FALSE(describe(store(), key("never").key).has_value());
  const AcquireResult a = acquire("k", "A", "ta", seconds(30));
  ASSERT_TRUE(a.acquired);
  const auto row = describe(store(), key("k").key);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->key, key("k").key);
  EXPECT_TRUE(row->held);
  EXPECT_TRUE(row->statusHeld);
  EXPECT_EQ(row->owner, listedOwner("A"));
  EXPECT_EQ(row->fencingToken, a.fencingToken);
  EXPECT_EQ(row->ttl, seconds(30));
  EXPECT_EQ(row->mode, LockMode::EXCLUSIVE);
  EXPECT_EQ(row->holder.host, "contract-host");
  EXPECT_EQ(row->holder.pid, 4242);
  ASSERT_TRUE(release("k", "ta"));
  const auto freed = describe(store(), key("k").key);
  ASSERT_TRUE(freed.has_value());
  EXPECT_FALSE(freed->held);
  EXPECT_FALSE(freed->statusHeld);
  EXPECT_EQ(freed->fencingToken, a.fencingToken);
}

TEST_P(Listing, HoldersOfGivesTheExclusiveHolderThenSharedOldestFirst) {
  EXPECT_TRUE(holdersOf(store(), key("k").key).empty());
  const AcquireResult w = acquire("k", "W", "tw", kShort);
  ASSERT_TRUE(w.acquired);
  // Expired, not taken: still listed, not held.
  waitPast(w.expiresAt);
  auto holders = holdersOf(store(), key("k").key);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_FALSE(holders[0].held);
  // SHARED holders take it over, oldest first.
  ASSERT_TRUE(acquireShared("k", "R1", "t1").acquired);
  ASSERT_TRUE(acquireShared("k", "R2", "t2").acquired);
  holders = holdersOf(store(), key("k").key);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].owner, listedOwner("R1"));
  EXPECT_EQ(holders[1].owner, listedOwner("R2"));
  EXPECT_LT(holders[0].fencingToken, holders[1].fencingToken);
  for (const auto& h : holders) {
    EXPECT_EQ(h.mode, LockMode::SHARED);
    EXPECT_TRUE(h.held);
  }
  // Exactly the key: not its descendants.
  ASSERT_TRUE(acquireShared("k.child", "R3", "t3").acquired);
  EXPECT_EQ(holdersOf(store(), key("k").key).size(), 2U);
}

TEST_P(Listing, ListHeldIsByPrefixInKeyOrderWithExpiredHoldsMarked) {
  ASSERT_TRUE(acquire("b", "A", "t1").acquired);
  ASSERT_TRUE(acquire("a.x", "A", "t2").acquired);
  const AcquireResult expired = acquire("c", "A", "t3", kShort);
  ASSERT_TRUE(expired.acquired);
  ASSERT_TRUE(acquireShared("a.y", "B", "t4").acquired);
  ASSERT_TRUE(acquire("freed", "A", "t5").acquired);
  ASSERT_TRUE(release("freed", "t5"));
  waitPast(expired.expiresAt);
  EXPECT_EQ(heldIds(), (Ids{"a.x", "a.y", "b", "c"}));
  const auto all = listHeld(store(), scope());
  ASSERT_EQ(all.size(), 4U);
  EXPECT_EQ(all[1].mode, LockMode::SHARED);
  EXPECT_TRUE(all[2].held);
  EXPECT_FALSE(all[3].held);
  // A narrower prefix; the empty prefix lists every key.
  EXPECT_EQ(listHeld(store(), key("a").key).size(), 2U);
  EXPECT_GE(listHeld(store(), "").size(), 4U);
}

TEST_P(Listing, ListWaitersIsByPrefixInKeyOrderThenOldestFirst) {
  EXPECT_EQ(wait("b", "W1"), Ids{});
  EXPECT_EQ(wait("a", "W3", seconds(30), LockMode::SHARED), Ids{});
  waitPast(store().now());
  EXPECT_EQ(wait("a", "W2"), Ids{});
  EXPECT_EQ(wait("gone", "W4", milliseconds(1)), Ids{});
  letLeasesEnd(milliseconds(1));
  const auto waiters = listWaiters(store(), scope());
  ASSERT_EQ(waiters.size(), 3U);
  EXPECT_EQ(waiters[0].key, key("a").key);
  EXPECT_EQ(waiters[0].owner, listedOwner("W3"));
  EXPECT_EQ(waiters[0].mode, LockMode::SHARED);
  EXPECT_EQ(waiters[1].owner, listedOwner("W2"));
  EXPECT_LT(waiters[0].requestedAt, waiters[1].requestedAt);
  EXPECT_EQ(waiters[2].key, key("b").key);
  EXPECT_GT(waiters[2].expiresAt, waiters[2].requestedAt);
  EXPECT_EQ(listWaiters(store(), key("b").key).size(), 1U);
}

// The waiter's own deadline (WaitRequest::untilDeadline) is listed beside
// the request's lease: a waiter for 10 minutes is not shown giving up when
// its 10 s lease ends. None given, none listed; a renewal records it anew.
TEST_P(Listing, ListWaitersGivesEachWaitersOwnDeadlineBesideItsLease) {
  const StoreKey k = key("k");
  const std::string patient = owner("patient");
  const std::string endless = owner("endless");
  const StoreTime before = store().now();
  ASSERT_TRUE(store()
                  .registerWait(WaitRequest{k, patient, seconds(10),
                                            LockMode::EXCLUSIVE, seconds(600)})
                  .deadlockCycle.empty());
  ASSERT_TRUE(store()
                  .registerWait(WaitRequest{k, endless, seconds(10),
                                            LockMode::SHARED, std::nullopt})
                  .deadlockCycle.empty());
  const StoreTime after = store().now();
  auto waiters = listWaiters(store(), k.key);
  ASSERT_EQ(waiters.size(), 2U);
  const WaitRecord& p =
      waiters[0].owner == listedOwner("patient") ? waiters[0] : waiters[1];
  const WaitRecord& e = &p == &waiters[0] ? waiters[1] : waiters[0];
  ASSERT_TRUE(p.deadline.has_value());
  // Whole milliseconds on both sides: a millisecond of slack.
  EXPECT_GE(*p.deadline, before + seconds(600) - milliseconds(1));
  EXPECT_LE(*p.deadline, after + seconds(600) + milliseconds(1));
  EXPECT_LE(p.expiresAt, after + seconds(10) + milliseconds(1))
      << "the lease is still the lease";
  EXPECT_FALSE(e.deadline.has_value());
  // Renewed without a deadline, then with one beyond any clock (100 years
  // and more: recorded as none).
  ASSERT_TRUE(store()
                  .registerWait(WaitRequest{k, patient, seconds(10),
                                            LockMode::EXCLUSIVE, std::nullopt})
                  .deadlockCycle.empty());
  ASSERT_TRUE(store()
                  .registerWait(WaitRequest{k, endless, seconds(10),
                                            LockMode::SHARED,
                                            std::chrono::hours(24 * 365 * 200)})
                  .deadlockCycle.empty());
  waiters = listWaiters(store(), k.key);
  ASSERT_EQ(waiters.size(), 2U);
  EXPECT_FALSE(waiters[0].deadline.has_value());
  EXPECT_FALSE(waiters[1].deadline.has_value());
}

TEST_P(Listing, ForceReleaseFreesWhoeverHolds) {
  ASSERT_TRUE(acquire("k", "A", "ta").acquired);
  EXPECT_TRUE(forceRelease(store(), key("k").key));
  EXPECT_FALSE(describe(store(), key("k").key)->held);
  EXPECT_FALSE(forceRelease(store(), key("k").key));
  EXPECT_FALSE(forceRelease(store(), key("never").key));
  // Its holder finds it gone; anyone may take it.
  EXPECT_FALSE(extend("k", "ta", seconds(30)).has_value());
  EXPECT_TRUE(acquire("k", "B", "tb").acquired);
}

INSTANTIATE_TEST_SUITE_P(Stores, Listing, ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
