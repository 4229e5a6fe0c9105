// SHARED locks and fair queueing on the FakeStore where its settable clock
// helps: transactional release of a SHARED hold, a crashed waiter's request
// counting until its deadline, the queue's order by age, and the wake-up
// when a request that held others back goes away.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dlm/dlm.h"
#include "support/error_code.h"
#include "support/fake_store.h"
#include "support/owners.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class SharedOnFake : public ::testing::Test {
 protected:
  std::unique_ptr<DistributedLockManager> manager() {
    auto m = DistributedLockManager::builder()
                 .clientId("c")
                 .farmId("f")
                 .store(store_)
                 .build();
    m->initialize();
    return m;
  }
  AcquireResult attempt(const StoreKey& key, const std::string& owner,
                        LockMode mode, const std::string& token) {
    return store_->tryAcquire(
        AcquireRequest{key, owner, token, seconds(30), holder_, mode});
  }
  std::shared_ptr<FakeStore> store_ = std::make_shared<FakeStore>();
  Holder holder_{"host", 1};
};

// Counts the keys a store announces.
class Announcements final : public ReleaseListener {
 public:
  void released(std::string_view key) override { keys.emplace_back(key); }
  void missedReleases() override {}
  std::vector<std::string> keys;
};

TEST_F(SharedOnFake, CommitLockFreesOnlyItsOwnSharedHoldAndOnlyAtCommit) {
  auto m = manager();
  Lock r0 = m->getLockInstance("doc", LockLevel::DC, LockMode::SHARED);
  Lock r1 = m->getLockInstance("doc", LockLevel::DC, LockMode::SHARED);
  asOwner("r0", [&] { m->tryAcquireLock(r0); });
  asOwner("r1", [&] { m->tryAcquireLock(r1); });
  FakeTransaction tx;
  m->commitLock(r0, tx);
  EXPECT_EQ(m->describeHolders(r1).size(), 2U) << "freed before the commit";
  tx.commit();
  auto holders = m->describeHolders(r1);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].owner, "r1");
  EXPECT_TRUE(m->releaseLock(r1));
  EXPECT_TRUE(m->describeHolders(r1).empty());
}

TEST_F(SharedOnFake, CommitLockOfATakenOverSharedHoldDoomsTheTransaction) {
  auto m = manager();
  Lock reader = m->getLockInstance("doc", LockLevel::DC, LockMode::SHARED);
  asOwner("reader", [&] { m->tryAcquireLock(reader, milliseconds(100)); });
  store_->advance(milliseconds(101));
  Lock writer = m->getLockInstance("doc", LockLevel::DC);
  asOwner("writer", [&] { m->tryAcquireLock(writer); });
  FakeTransaction tx;
  EXPECT_EQ(codeOf([&] { m->commitLock(reader, tx); }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_TRUE(tx.doomed());
  EXPECT_FALSE(m->rollbackLock(reader));
  EXPECT_TRUE(m->describeLock(writer).has_value());
}

TEST_F(SharedOnFake, ACrashedWaitersRequestCountsUntilItsDeadline) {
  const StoreKey a = pathKey("c#", "a");
  const StoreKey ab = pathKey("c#", "a.b");
  ASSERT_TRUE(store_->registerWait({a, "crashed", milliseconds(500)})
                  .deadlockCycle.empty());
  AcquireResult r = attempt(ab, "newcomer", LockMode::SHARED, "t1");
  EXPECT_FALSE(r.acquired);
  EXPECT_TRUE(r.queued);
  EXPECT_EQ(r.blockedBy, a.key);
  store_->advance(milliseconds(499));
  EXPECT_FALSE(attempt(ab, "newcomer", LockMode::SHARED, "t2").acquired);
  store_->advance(milliseconds(1));
  r = attempt(ab, "newcomer", LockMode::SHARED, "t3");
  EXPECT_TRUE(r.acquired);
  EXPECT_FALSE(r.queued);
}

TEST_F(SharedOnFake, OlderRequestsGoFirstAndAnOwnersOwnRequestKeepsItsPlace) {
  const StoreKey a = pathKey("c#", "a");
  ASSERT_TRUE(
      store_->registerWait({a, "first", seconds(10)}).deadlockCycle.empty());
  store_->advance(milliseconds(10));
  ASSERT_TRUE(
      store_->registerWait({a, "second", seconds(10)}).deadlockCycle.empty());
  AcquireResult r = attempt(a, "second", LockMode::EXCLUSIVE, "t1");
  EXPECT_TRUE(r.queued) << "the younger request waits for the older one";
  r = attempt(a, "first", LockMode::EXCLUSIVE, "t2");
  EXPECT_TRUE(r.acquired) << "the oldest request is not held back";
  EXPECT_EQ(store_->holdersOf(a.key).size(), 1U);
}

TEST_F(SharedOnFake, AWaitingSharedRequestHoldsBackOnlyExclusiveAttempts) {
  const StoreKey a = pathKey("c#", "a");
  const StoreKey ab = pathKey("c#", "a.b");
  ASSERT_TRUE(store_->registerWait({a, "reader", seconds(10), LockMode::SHARED})
                  .deadlockCycle.empty());
  const StoreKey ac = pathKey("c#", "a.c");
  const AcquireResult r = attempt(ac, "other", LockMode::EXCLUSIVE, "t3");
  EXPECT_TRUE(r.queued);
  EXPECT_FALSE(r.acquired);
  EXPECT_TRUE(attempt(ab, "other", LockMode::SHARED, "t1").acquired);
  EXPECT_TRUE(attempt(a, "other", LockMode::SHARED, "t2").acquired);
}

TEST_F(SharedOnFake, RemovingARequestWakesOnlyWhenItHeldSomeoneBack) {
  Announcements seen;
  ASSERT_TRUE(store_->subscribeReleases(&seen));
  const StoreKey a = pathKey("c#", "a");
  const StoreKey ab = pathKey("c#", "a.b");
  const StoreKey b = pathKey("c#", "b");
  ASSERT_TRUE(
      store_->registerWait({a, "w1", seconds(10)}).deadlockCycle.empty());
  ASSERT_TRUE(store_->registerWait({b, "w3", seconds(10), LockMode::SHARED})
                  .deadlockCycle.empty());
  store_->unregisterWait(b.key, "w3");
  EXPECT_TRUE(seen.keys.empty()) << "nobody waited behind it";
  ASSERT_TRUE(store_->registerWait({ab, "w2", seconds(10), LockMode::SHARED})
                  .deadlockCycle.empty());
  store_->unregisterWait(a.key, "w1");
  ASSERT_EQ(seen.keys.size(), 1U);
  EXPECT_EQ(seen.keys[0], a.key);
  store_->unsubscribeReleases(&seen);
}

TEST_F(SharedOnFake, WaitForGraphFollowsQueueEdges) {
  // A holds SHARED a; B's EXCLUSIVE request on a waits for A; A's request
  // for SHARED a.b is queued behind B's: a cycle through the queue edge.
  const StoreKey a = pathKey("c#", "a");
  const StoreKey ab = pathKey("c#", "a.b");
  ASSERT_TRUE(attempt(a, "A", LockMode::SHARED, "ta").acquired);
  ASSERT_TRUE(
      store_->registerWait({a, "B", seconds(10)}).deadlockCycle.empty());
  store_->advance(milliseconds(10));
  const auto cycle =
      store_->registerWait({ab, "A", seconds(10), LockMode::SHARED})
          .deadlockCycle;
  ASSERT_EQ(cycle.size(), 2U);
  EXPECT_EQ(cycle[0], ab.key);
  EXPECT_EQ(cycle[1], a.key);
  // A third owner's SHARED request on a.b waits for B only: no cycle.
  EXPECT_TRUE(store_->registerWait({ab, "C", seconds(10), LockMode::SHARED})
                  .deadlockCycle.empty());
}

TEST_F(SharedOnFake, ForceReleaseFreesSharedHoldersToo) {
  const StoreKey a = pathKey("c#", "a");
  ASSERT_TRUE(attempt(a, "r1", LockMode::SHARED, "t1").acquired);
  ASSERT_TRUE(attempt(a, "r2", LockMode::SHARED, "t2").acquired);
  EXPECT_TRUE(store_->forceRelease(a.key));
  EXPECT_TRUE(store_->holdersOf(a.key).empty());
  EXPECT_FALSE(store_->extend(a.key, "t1", seconds(30), LockMode::SHARED));
  EXPECT_FALSE(store_->release(a, "t2", LockMode::SHARED));
  EXPECT_FALSE(store_->forceRelease(a.key));
  EXPECT_TRUE(attempt(a, "w", LockMode::EXCLUSIVE, "t3").acquired);
}

}  // namespace
}  // namespace dlm::test
