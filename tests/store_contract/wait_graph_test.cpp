// registerWait / unregisterWait: the wait-for graph through holders and
// older requests, along the hierarchy, without expired holds or requests,
// and its serialisation between store objects.
#include <atomic>
#include <thread>

#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using WaitGraph = StoreContract;

TEST_P(WaitGraph, AWaitWithoutACycleIsRecordedOnceAndUnregistered) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  EXPECT_EQ(wait("k1", "B"), Ids{});
  EXPECT_EQ(waiting(), Ids{"B waits k1"});
  // Registering again replaces the row.
  EXPECT_EQ(wait("k1", "B"), Ids{});
  EXPECT_EQ(waiting(), Ids{"B waits k1"});
  // Nobody in the way: recorded too.
  EXPECT_EQ(wait("free.key", "C"), Ids{});
  EXPECT_EQ(waiting(), (Ids{"B waits k1", "C waits free.key"}));
  unregister("k1", "B");
  unregister("k1", "B");  // nothing left: no error
  unregister("free.key", "C");
  EXPECT_EQ(waiting(), Ids{});
}

TEST_P(WaitGraph, TwoOwnersWaitingForEachOtherCloseACycle) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  EXPECT_EQ(wait("k2", "A"), Ids{});
  // B holds k2, which A waits for; A holds k1.
  EXPECT_EQ(wait("k1", "B"), (Ids{"k1", "k2"}));
  // The refused wait was not recorded.
  EXPECT_EQ(waiting(), Ids{"A waits k2"});
}

TEST_P(WaitGraph, ThreeOwnersInARingGiveTheKeysInWaitOrder) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  ASSERT_TRUE(acquire("k3", "C", "tc").acquired);
  EXPECT_EQ(wait("k2", "A"), Ids{});
  EXPECT_EQ(wait("k3", "B"), Ids{});
  // C waits for k1 (held by A), A for k2 (B), B for k3 (C's own).
  EXPECT_EQ(wait("k1", "C"), (Ids{"k1", "k2", "k3"}));
}

TEST_P(WaitGraph, WaitingForWhatTheCallerHoldsIsACycleOfOne) {
  ASSERT_TRUE(acquire("a.b", "A", "ta").acquired);
  EXPECT_EQ(wait("a.b", "A"), Ids{"a.b"});
  EXPECT_EQ(wait("a", "A"), Ids{"a"});          // holds a descendant
  EXPECT_EQ(wait("a.b.c", "A"), Ids{"a.b.c"});  // holds an ancestor
  EXPECT_EQ(waiting(), Ids{});
  // A sibling is not blocked by it.
  EXPECT_EQ(wait("a.c", "A"), Ids{});
  EXPECT_EQ(waiting(), Ids{"A waits a.c"});
}

TEST_P(WaitGraph, AHeldChildBlocksAWaiterOnItsParent) {
  ASSERT_TRUE(acquire("a.b", "B", "tb").acquired);
  ASSERT_TRUE(acquire("x", "A", "ta").acquired);
  EXPECT_EQ(wait("x", "B"), Ids{});
  EXPECT_EQ(wait("a", "A"), (Ids{"a", "x"}));
}

TEST_P(WaitGraph, AHeldParentBlocksAWaiterOnItsChild) {
  ASSERT_TRUE(acquire("a", "B", "tb").acquired);
  ASSERT_TRUE(acquire("x", "A", "ta").acquired);
  EXPECT_EQ(wait("x", "B"), Ids{});
  EXPECT_EQ(wait("a.b.c", "A"), (Ids{"a.b.c", "x"}));
}

TEST_P(WaitGraph, TheBlockersOfAWaitedKeyFollowTheHierarchyToo) {
  // B waits for q.r, blocked by A's hold on q (an ancestor of what B waits
  // for); A waits for p.x, under B's p.
  ASSERT_TRUE(acquire("q", "A", "ta").acquired);
  ASSERT_TRUE(acquire("p", "B", "tb").acquired);
  EXPECT_EQ(wait("q.r", "B"), Ids{});
  EXPECT_EQ(wait("p.x", "A"), (Ids{"p.x", "q.r"}));
  // And through a descendant of the waited key: C holds s.t.u, waits for y.
  ASSERT_TRUE(acquire("s.t.u", "C", "tc").acquired);
  ASSERT_TRUE(acquire("y", "D", "td").acquired);
  EXPECT_EQ(wait("s.t", "D"), Ids{});
  EXPECT_EQ(wait("y", "C"), (Ids{"y", "s.t"}));
}

TEST_P(WaitGraph, SiblingsAndKeysWithACommonPrefixDoNotBlock) {
  ASSERT_TRUE(acquire("a.c", "B", "tb").acquired);
  ASSERT_TRUE(acquire("x", "A", "ta").acquired);
  EXPECT_EQ(wait("x", "B"), Ids{});
  EXPECT_EQ(wait("a.b", "A"), Ids{});
  // "mn" is not under "m".
  ASSERT_TRUE(acquire("mn", "C", "tc").acquired);
  EXPECT_EQ(wait("x", "C"), Ids{});
  EXPECT_EQ(wait("m", "A"), Ids{});
}

TEST_P(WaitGraph, KeysWithAnyBytesFindTheirBlocker) {
  // Quotes, backslashes, control characters and non-ASCII must come back
  // byte for byte from a request row to find the blocker.
  const std::string odd = "p\"\\\x01\n\xC3\xA9\xF0\x9F\x94\x92]'{,}";
  ASSERT_TRUE(acquire(odd, "A", "ta").acquired);
  ASSERT_TRUE(acquire("y", "B", "tb").acquired);
  EXPECT_EQ(wait(odd + ".child.leaf", "B"), Ids{});
  EXPECT_EQ(wait("y", "A"), (Ids{"y", odd + ".child.leaf"}));
}

TEST_P(WaitGraph, WithoutHierarchyOnlyTheKeyItselfBlocks) {
  const Holder holder{"h", 1};
  const std::string a = owner("A"), b = owner("B");
  const std::string ta = owner("ta"), tb = owner("tb");
  const StoreKey ab = flatKey("a.b"), x = flatKey("x"), parent = flatKey("a");
  ASSERT_TRUE(store()
                  .tryAcquire(AcquireRequest{ab, b, tb, seconds(30), holder})
                  .acquired);
  ASSERT_TRUE(store()
                  .tryAcquire(AcquireRequest{x, a, ta, seconds(30), holder})
                  .acquired);
  EXPECT_TRUE(store()
                  .registerWait(WaitRequest{x, b, seconds(30)})
                  .deadlockCycle.empty());
  EXPECT_TRUE(store()
                  .registerWait(WaitRequest{parent, a, seconds(30)})
                  .deadlockCycle.empty());
  EXPECT_EQ(ids(store().registerWait(WaitRequest{ab, a, seconds(30)})
                    .deadlockCycle),
            (Ids{"a.b", "x"}));
}

TEST_P(WaitGraph, ExpiredHoldsAreNotEdges) {
  const AcquireResult a = acquire("k1", "A", "ta", kShort);
  ASSERT_TRUE(a.acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  EXPECT_EQ(wait("k2", "A"), Ids{});
  waitPast(a.expiresAt);
  // A's hold on k1 has expired (nobody took it yet): it blocks nobody.
  EXPECT_EQ(wait("k1", "B"), Ids{});
}

TEST_P(WaitGraph, ExpiredRequestsAreIgnoredAndNotListed) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  // A crashed waiter's row: A's wait for k2 ended soon after it began.
  EXPECT_EQ(wait("k2", "A", kShort), Ids{});
  waitPast(store().now() + kShort);
  EXPECT_EQ(waiting(), Ids{});
  EXPECT_EQ(wait("k1", "B"), Ids{});
  EXPECT_EQ(waiting(), Ids{"B waits k1"});
}

TEST_P(WaitGraph, AnUnregisteredWaitIsNoLongerAnEdge) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  EXPECT_EQ(wait("k2", "A"), Ids{});
  EXPECT_EQ(wait("k1", "B"), (Ids{"k1", "k2"}));
  unregister("k2", "A");
  EXPECT_EQ(wait("k1", "B"), Ids{});
}

TEST_P(WaitGraph, AReleasedLockIsNoLongerAnEdge) {
  ASSERT_TRUE(acquire("k1", "A", "ta").acquired);
  ASSERT_TRUE(acquire("k2", "B", "tb").acquired);
  EXPECT_EQ(wait("k2", "A"), Ids{});
  ASSERT_TRUE(release("k1", "ta"));
  EXPECT_EQ(wait("k1", "B"), Ids{});
}

TEST_P(WaitGraph, AnOlderRequestIsAnEdgeToo) {
  // Nobody holds k, but A waits for it (and for h, which Z holds): Z asking
  // for k queues behind A's older request, which waits for Z.
  ASSERT_TRUE(acquire("h", "Z", "tz").acquired);
  EXPECT_EQ(wait("k", "A"), Ids{});
  EXPECT_EQ(wait("h", "A"), Ids{});
  EXPECT_EQ(wait("k", "Z"), (Ids{"k", "h"}));
  // A waiting reader holds back no reader: no edge, no cycle.
  EXPECT_EQ(wait("r", "A", seconds(30), LockMode::SHARED), Ids{});
  EXPECT_EQ(wait("r", "Z", seconds(30), LockMode::SHARED), Ids{});
}

TEST_P(WaitGraph, OppositeWaitsRegisteredAtOnceFindTheCycleExactlyOnce) {
  auto first = otherStore();
  auto second = otherStore();
  constexpr int kRounds = 30;
  const Holder holder{"h", 1};
  const std::string a = owner("A"), b = owner("B");
  const std::string ta = owner("ta"), tb = owner("tb");
  for (int round = 0; round < kRounds; ++round) {
    const StoreKey ka = key("a" + std::to_string(round));
    const StoreKey kb = key("b" + std::to_string(round));
    ASSERT_TRUE(first->tryAcquire(AcquireRequest{ka, a, ta, seconds(30), holder})
                    .acquired);
    ASSERT_TRUE(
        second->tryAcquire(AcquireRequest{kb, b, tb, seconds(30), holder})
            .acquired);
    std::atomic<int> ready{0};
    std::vector<std::string> cycles[2];
    std::string errors[2];
    auto side = [&](int i, LockStore& s, const StoreKey& want,
                    const std::string& who) {
      ++ready;
      while (ready < 2) std::this_thread::yield();
      // A registration that waited past rowLockWait for the other's row
      // lock (a busy machine) failed transiently: repeated, as the manager
      // does (storeRetries). Exactly one of the two must see the cycle.
      for (int attempt = 0;; ++attempt) {
        try {
          cycles[i] =
              s.registerWait(WaitRequest{want, who, seconds(30)}).deadlockCycle;
          errors[i].clear();
          return;
        } catch (const DLMException& e) {
          errors[i] = e.what();
          if (e.code() != ErrorCode::RETRIES_EXHAUSTED || attempt >= 20) return;
        } catch (const std::exception& e) {
          errors[i] = e.what();
          return;
        }
      }
    };
    std::thread x(side, 0, std::ref(*first), kb, a);
    std::thread y(side, 1, std::ref(*second), ka, b);
    x.join();
    y.join();
    ASSERT_EQ(errors[0], "");
    ASSERT_EQ(errors[1], "");
    ASSERT_EQ(cycles[0].empty() + cycles[1].empty(), 1)
        << "round " << round << ": " << ::testing::PrintToString(cycles[0])
        << " / " << ::testing::PrintToString(cycles[1]);
    EXPECT_EQ(waiting().size(), 1U);
    first->unregisterWait(kb.key, a);
    first->unregisterWait(ka.key, b);
    ASSERT_TRUE(first->release(ka, ta, LockMode::EXCLUSIVE));
    ASSERT_TRUE(first->release(kb, tb, LockMode::EXCLUSIVE));
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, WaitGraph,
                         ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
