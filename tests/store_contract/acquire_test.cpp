// tryAcquire, release and extend by mode and path: the hierarchy protocol
// (ancestors, descendants, siblings), takeover of expired holders, retries
// with the same token, fair queueing behind older requests, close().
#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Acquire = StoreContract;

TEST_P(Acquire, AFreeKeyIsGrantedAndAHeldOneRefusedNamingItself) {
  const AcquireResult first = acquire("k", "A", "ta");
  ASSERT_TRUE(first.acquired);
  EXPECT_EQ(first.fencingToken, 1);
  EXPECT_GT(first.expiresAt, first.acquiredAt);
  const AcquireResult second = acquire("k", "B", "tb");
  EXPECT_FALSE(second.acquired);
  EXPECT_FALSE(second.queued);
  EXPECT_EQ(second.blockedBy, key("k").key);
  // The same owner with another token is refused too: holds are per token.
  EXPECT_FALSE(acquire("k", "A", "ta2").acquired);
  EXPECT_TRUE(release("k", "ta"));
  const AcquireResult next = acquire("k", "B", "tb");
  ASSERT_TRUE(next.acquired);
  EXPECT_EQ(next.fencingToken, 2);
}

TEST_P(Acquire, AncestorsAndDescendantsBlockSiblingsAndPrefixesDoNot) {
  ASSERT_TRUE(acquire("a.b", "A", "ta").acquired);
  const AcquireResult parent = acquire("a", "B", "tb1");
  EXPECT_FALSE(parent.acquired);
  EXPECT_EQ(parent.blockedBy, key("a.b").key);
  const AcquireResult child = acquire("a.b.c", "B", "tb2");
  EXPECT_FALSE(child.acquired);
  EXPECT_EQ(child.blockedBy, key("a.b").key);
  EXPECT_TRUE(acquire("a.c", "B", "tb3").acquired);
  // "a.bc" only starts with the same bytes: not under "a.b".
  EXPECT_TRUE(acquire("a.bc", "B", "tb4").acquired);
}

TEST_P(Acquire, WithoutHierarchyOnlyTheKeyItselfBlocks) {
  const Holder holder{"h", 1};
  const StoreKey ab = flatKey("a.b");
  const StoreKey a = flatKey("a");
  const std::string o1 = owner("A"), o2 = owner("B");
  const std::string t1 = owner("t1"), t2 = owner("t2"), t3 = owner("t3");
  ASSERT_TRUE(
      store().tryAcquire(AcquireRequest{ab, o1, t1, seconds(30), holder})
          .acquired);
  EXPECT_TRUE(store()
                  .tryAcquire(AcquireRequest{a, o2, t2, seconds(30), holder})
                  .acquired);
  EXPECT_FALSE(store()
                   .tryAcquire(AcquireRequest{ab, o2, t3, seconds(30), holder})
                   .acquired);
}

TEST_P(Acquire, ARetryWithTheHoldingTokenChangesNothing) {
  const AcquireResult first = acquire("k", "A", "ta");
  const AcquireResult again = acquire("k", "A", "ta");
  ASSERT_TRUE(first.acquired);
  ASSERT_TRUE(again.acquired);
  EXPECT_EQ(again.fencingToken, first.fencingToken);
  EXPECT_EQ(holdersOf(store(), key("k").key).size(), 1U);
}

TEST_P(Acquire, AReleaseIsConditionalOnTheTokenAndSafeToRetry) {
  ASSERT_TRUE(acquire("k", "A", "ta").acquired);
  EXPECT_FALSE(release("k", "not-the-token"));
  EXPECT_TRUE(describe(store(), key("k").key)->held);
  EXPECT_TRUE(release("k", "ta"));
  EXPECT_TRUE(release("k", "ta"));  // already freed by this token
  EXPECT_FALSE(describe(store(), key("k").key)->held);
  EXPECT_FALSE(extend("k", "ta", seconds(30)).has_value());
}

TEST_P(Acquire, ExtendMovesTheExpiryOfTheHoldingTokenOnly) {
  const AcquireResult a = acquire("k", "A", "ta", kShort);
  ASSERT_TRUE(a.acquired);
  const auto extended = extend("k", "ta", seconds(60));
  ASSERT_TRUE(extended.has_value());
  EXPECT_GT(*extended, a.expiresAt);
  EXPECT_FALSE(extend("k", "other", seconds(60)).has_value());
  letLeasesEnd();
  EXPECT_TRUE(describe(store(), key("k").key)->held);
}

TEST_P(Acquire, AnExpiredHolderIsTakenOverAndLosesReleaseAndExtend) {
  const AcquireResult old = acquire("k", "A", "ta", kShort);
  ASSERT_TRUE(old.acquired);
  EXPECT_FALSE(acquire("k", "B", "tb0").acquired);
  waitPast(old.expiresAt);
  // Expired but not yet taken: its holder may still extend it.
  EXPECT_FALSE(describe(store(), key("k").key)->held);
  EXPECT_TRUE(describe(store(), key("k").key)->statusHeld);
  const AcquireResult taken = acquire("k", "B", "tb");
  ASSERT_TRUE(taken.acquired) << taken.blockedBy;
  EXPECT_GT(taken.fencingToken, old.fencingToken);
  EXPECT_FALSE(extend("k", "ta", seconds(30)).has_value());
  EXPECT_FALSE(release("k", "ta"));
  EXPECT_EQ(describe(store(), key("k").key)->owner, listedOwner("B"));
}

TEST_P(Acquire, AnExpiredHoldStillNotTakenCanBeExtendedByItsHolder) {
  const AcquireResult old = acquire("k", "A", "ta", kShort);
  ASSERT_TRUE(old.acquired);
  waitPast(old.expiresAt);
  ASSERT_TRUE(extend("k", "ta", seconds(30)).has_value());
  EXPECT_TRUE(describe(store(), key("k").key)->held);
  EXPECT_FALSE(acquire("k", "B", "tb").acquired);
}

TEST_P(Acquire, AnOlderConflictingRequestGoesFirst) {
  ASSERT_TRUE(acquire("k", "H", "th").acquired);
  EXPECT_EQ(wait("k", "W1"), Ids{});
  EXPECT_EQ(wait("k", "W2"), Ids{});
  ASSERT_TRUE(release("k", "th"));
  // Free, but W1 waits: a newcomer and the younger waiter are queued.
  for (const std::string who : {"N", "W2"}) {
    const AcquireResult r = acquire("k", who, "t" + who);
    EXPECT_FALSE(r.acquired) << who;
    EXPECT_TRUE(r.queued) << who;
    EXPECT_EQ(r.blockedBy, key("k").key) << who;
  }
  // A request on an ancestor holds back its descendants too.
  const AcquireResult below = acquire("k.child", "N", "tn2");
  EXPECT_FALSE(below.acquired);
  EXPECT_TRUE(below.queued);
  EXPECT_EQ(below.blockedBy, key("k").key);
  // The oldest waiter takes it (its request ends with the grant).
  ASSERT_TRUE(acquire("k", "W1", "tw1").acquired);
  EXPECT_EQ(waiting(), Ids{"W2 waits k"});
  ASSERT_TRUE(release("k", "tw1"));
  EXPECT_TRUE(acquire("k", "W2", "tw2").acquired);
}

TEST_P(Acquire, AGoneWaiterHoldsBackNobody) {
  EXPECT_EQ(wait("k", "W"), Ids{});
  EXPECT_TRUE(acquire("k", "N", "tn").acquired == false);
  unregister("k", "W");
  EXPECT_TRUE(acquire("k", "N", "tn").acquired);
  // An expired request holds back nobody either.
  EXPECT_EQ(wait("e", "W", milliseconds(1)), Ids{});
  letLeasesEnd(milliseconds(1));
  EXPECT_TRUE(acquire("e", "N", "te").acquired);
}

TEST_P(Acquire, AClosedStoreRefusesCalls) {
  if (!traits().closeRefusesCalls) GTEST_SKIP() << "close() does nothing";
  auto closed = otherStore();
  closed->close();
  const StoreKey k = key("k");
  const std::string o = owner("A");
  EXPECT_EQ(codeOf([&] {
              closed->tryAcquire(
                  AcquireRequest{k, o, o, std::chrono::seconds(1), Holder{}});
            }),
            ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(codeOf([&] {
              closed->registerWait(WaitRequest{k, o, std::chrono::seconds(1)});
            }),
            ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(codeOf([&] { closed->unregisterWait(k.key, o); }),
            ErrorCode::INTERNAL_ERROR);
}

INSTANTIATE_TEST_SUITE_P(Stores, Acquire,
                         ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
