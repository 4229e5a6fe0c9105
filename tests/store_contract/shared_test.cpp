// SHARED holds: coexistence and conflicts along the path, takeovers between
// the modes, fencing tokens across them, retries, upgrades, and waiting
// writers ahead of new readers.
#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Shared = StoreContract;

TEST_P(Shared, SharedHoldsCoexistAndConflictAlongThePath) {
  ASSERT_TRUE(acquireShared("a.b", "A", "t1").acquired);
  ASSERT_TRUE(acquireShared("a.b", "B", "t2").acquired);
  // SHARED on an ancestor and a descendant: granted.
  EXPECT_TRUE(acquireShared("a", "C", "t3").acquired);
  EXPECT_TRUE(acquireShared("a.b.c", "D", "t4").acquired);
  // EXCLUSIVE anywhere on the path: refused, naming the first blocker (the
  // key itself, then ancestors root first, then descendants).
  const AcquireResult onKey = acquire("a.b", "E", "t5");
  EXPECT_FALSE(onKey.acquired);
  EXPECT_EQ(onKey.blockedBy, key("a.b").key);
  const AcquireResult below = acquire("a.b.c.d", "E", "t6");
  EXPECT_FALSE(below.acquired);
  EXPECT_EQ(below.blockedBy, key("a").key);
  // A sibling is free.
  EXPECT_TRUE(acquireShared("a.x", "E", "t7").acquired);
  EXPECT_EQ(heldIds(), (Ids{"a", "a.b", "a.b", "a.b.c", "a.x"}));
}

TEST_P(Shared, AnExclusiveHoldBlocksSharedOnItsPath) {
  ASSERT_TRUE(acquire("p.q", "A", "ta").acquired);
  for (const std::string id : {"p.q", "p", "p.q.r"}) {
    const AcquireResult r = acquireShared(id, "B", "tb" + id);
    EXPECT_FALSE(r.acquired) << id;
    EXPECT_EQ(r.blockedBy, key("p.q").key) << id;
  }
  EXPECT_TRUE(acquireShared("p.s", "B", "tbs").acquired);
}

TEST_P(Shared, ASharedAcquirerTakesOverAnExpiredExclusiveHolder) {
  const AcquireResult first = acquire("k", "A", "old", kShort);
  ASSERT_TRUE(first.acquired);
  const AcquireResult early = acquireShared("k", "B", "early");
  EXPECT_FALSE(early.acquired);
  EXPECT_EQ(early.blockedBy, key("k").key);
  waitPast(first.expiresAt);

  const AcquireResult shared = acquireShared("k", "B", "reader");
  ASSERT_TRUE(shared.acquired) << shared.blockedBy;
  EXPECT_GT(shared.fencingToken, first.fencingToken);
  // The expired holder lost it: its extension and release fail.
  EXPECT_FALSE(extend("k", "old", seconds(30)).has_value());
  EXPECT_FALSE(release("k", "old"));
  const auto holders = holdersOf(store(), key("k").key);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, LockMode::SHARED);
  EXPECT_EQ(holders[0].owner, listedOwner("B"));
  EXPECT_TRUE(holders[0].held);
  EXPECT_EQ(holders[0].fencingToken, shared.fencingToken);
  // The reader holds it: extend works, by its own token and mode.
  EXPECT_TRUE(extend("k", "reader", seconds(30), LockMode::SHARED).has_value());
  EXPECT_FALSE(extend("k", "old", seconds(30), LockMode::SHARED).has_value());
}

TEST_P(Shared, AnExclusiveAcquirerTakesOverExpiredSharedHolders) {
  const AcquireResult r1 = acquireShared("k", "A", "r1", kShort);
  ASSERT_TRUE(r1.acquired);
  ASSERT_TRUE(acquireShared("k", "B", "r2", kShort).acquired);
  EXPECT_EQ(holdersOf(store(), key("k").key).size(), 2U);
  EXPECT_FALSE(acquire("k", "C", "early").acquired);
  letLeasesEnd();

  const AcquireResult exclusive = acquire("k", "C", "writer");
  ASSERT_TRUE(exclusive.acquired) << exclusive.blockedBy;
  EXPECT_GT(exclusive.fencingToken, r1.fencingToken);
  for (const std::string token : {"r1", "r2"}) {
    EXPECT_FALSE(extend("k", token, seconds(30), LockMode::SHARED).has_value())
        << token;
    EXPECT_FALSE(release("k", token, LockMode::SHARED)) << token;
  }
  const auto holders = holdersOf(store(), key("k").key);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, LockMode::EXCLUSIVE);
  EXPECT_EQ(holders[0].owner, listedOwner("C"));
}

TEST_P(Shared, FirstBlockerIsInKeyOrderAcrossBothKindsOfHold) {
  // Descendants held both ways: the first in key order is named (where the
  // store orders them; see StoreTraits).
  ASSERT_TRUE(acquire("p.b", "A", "t1").acquired);
  ASSERT_TRUE(acquireShared("p.a", "B", "t2").acquired);
  const AcquireResult root = acquire("p", "C", "t3");
  EXPECT_FALSE(root.acquired);
  if (traits().firstBlockerInKeyOrder) {
    EXPECT_EQ(root.blockedBy, key("p.a").key);
  } else {
    EXPECT_TRUE(root.blockedBy == key("p.a").key ||
                root.blockedBy == key("p.b").key)
        << root.blockedBy;
  }
}

TEST_P(Shared, FencingTokensGrowAcrossModes) {
  std::int64_t last = 0;
  auto expectNext = [&](const AcquireResult& r) {
    ASSERT_TRUE(r.acquired) << r.blockedBy;
    EXPECT_GT(r.fencingToken, last);
    last = r.fencingToken;
  };
  expectNext(acquireShared("f", "A", "s1"));
  expectNext(acquireShared("f", "B", "s2"));
  EXPECT_TRUE(release("f", "s1", LockMode::SHARED));
  EXPECT_FALSE(release("f", "s1", LockMode::SHARED));  // already gone
  EXPECT_TRUE(release("f", "s2", LockMode::SHARED));
  expectNext(acquire("f", "C", "e1"));
  EXPECT_TRUE(release("f", "e1"));
  expectNext(acquireShared("f", "A", "s3"));
  EXPECT_TRUE(release("f", "s3", LockMode::SHARED));
  const AcquireResult shortLease = acquire("f", "B", "e2", kShort);
  expectNext(shortLease);
  waitPast(shortLease.expiresAt);
  expectNext(acquireShared("f", "A", "s4"));
}

TEST_P(Shared, ARetriedSharedAcquireWithItsTokenChangesNothing) {
  const AcquireResult first = acquireShared("doc", "R", "r1");
  const AcquireResult again = acquireShared("doc", "R", "r1");
  ASSERT_TRUE(first.acquired);
  ASSERT_TRUE(again.acquired);
  EXPECT_EQ(again.fencingToken, first.fencingToken);
  EXPECT_EQ(holdersOf(store(), key("doc").key).size(), 1U);
}

TEST_P(Shared, UpgradingASharedHoldIsADeadlockOfOne) {
  ASSERT_TRUE(acquireShared("u", "Z", "tz").acquired);
  EXPECT_EQ(wait("u", "Z", seconds(5), LockMode::EXCLUSIVE), Ids{"u"});
  // Another owner's EXCLUSIVE request waits for Z; Z asking SHARED for a
  // descendant queues behind that request (older, or recorded in the same
  // millisecond by an owner that sorts first), which waits for Z: a cycle.
  EXPECT_EQ(wait("u", "B", seconds(5), LockMode::EXCLUSIVE), Ids{});
  EXPECT_EQ(wait("u.v", "Z", seconds(5), LockMode::SHARED), (Ids{"u.v", "u"}));
}

TEST_P(Shared, AnOlderWaitingWriterHoldsBackNewReaders) {
  ASSERT_TRUE(acquireShared("q", "R1", "t1").acquired);
  EXPECT_EQ(wait("q", "W", seconds(30), LockMode::EXCLUSIVE), Ids{});
  const auto waiters = listWaiters(store(), scope());
  ASSERT_EQ(waiters.size(), 1U);
  EXPECT_EQ(waiters[0].mode, LockMode::EXCLUSIVE);
  // A new reader, of the key or of a descendant, is queued behind it.
  for (const std::string id : {"q", "q.child"}) {
    const AcquireResult r = acquireShared(id, "R2", "t2" + id);
    EXPECT_FALSE(r.acquired) << id;
    EXPECT_TRUE(r.queued) << id;
    EXPECT_EQ(r.blockedBy, key("q").key) << id;
  }
  // A waiting reader holds back no reader.
  unregister("q", "W");
  EXPECT_EQ(wait("q", "W", seconds(30), LockMode::SHARED), Ids{});
  EXPECT_TRUE(acquireShared("q", "R2", "t3").acquired);
}

INSTANTIATE_TEST_SUITE_P(Stores, Shared, ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
