// TTL expiry by the store's clock, takeover, and the waiting acquireLock.
#include <thread>

#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/owners.h"
#include "support/scheduling_lag.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ExpiryAndWait = StoreConformance;

TEST_P(ExpiryAndWait, LockExpiresAtItsTtlByTheStoreClock) {
  auto holder = manager();
  auto other = manager();
  Lock held = holder->getLockInstance("ttl", LockLevel::DC);
  holder->tryAcquireLock(held, milliseconds(600));
  EXPECT_EQ(held.expiresAt() - held.acquiredAt(), milliseconds(600));
  // Still inside the TTL by the store's clock: refused.
  const StoreTime now = other->store().now();
  ASSERT_LT(now + milliseconds(100), held.expiresAt())
      << "the store clock already passed most of the TTL";
  Lock early = other->getLockInstance("ttl", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { other->tryAcquireLock(early); }),
            ErrorCode::LOCK_UNAVAILABLE);
  // Past expiresAt by the store's clock: free to take.
  waitForStoreTime(other->store(), held.expiresAt());
  Lock late = other->getLockInstance("ttl", LockLevel::DC);
  other->tryAcquireLock(late);
  EXPECT_TRUE(late.isAcquired());
  EXPECT_EQ(late.fencingToken(), held.fencingToken() + 1);
}

TEST_P(ExpiryAndWait,
       ReleaseAfterExpiryAndTakeoverIsFalseAndKeepsTheNewHolder) {
  auto first = manager();
  auto second = manager();
  Lock old = first->getLockInstance("job", LockLevel::DC);
  first->tryAcquireLock(old, milliseconds(100));
  waitForStoreTime(first->store(), old.expiresAt());
  Lock fresh = second->getLockInstance("job", LockLevel::DC);
  second->tryAcquireLock(fresh);
  EXPECT_FALSE(first->releaseLock(old));
  EXPECT_FALSE(old.isAcquired());
  const auto row = adminOf(second->store()).describe(fresh.storeKey());
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->held);
  EXPECT_EQ(row->owner, second->listedOwner(fresh.owner()));
  EXPECT_EQ(row->fencingToken, fresh.fencingToken());
  Lock third = first->getLockInstance("job", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { first->tryAcquireLock(third); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_TRUE(second->releaseLock(fresh));
}

TEST_P(ExpiryAndWait, ExpiredButUntakenLockCanStillBeReleased) {
  auto m = manager();
  Lock lock = m->getLockInstance("lapsed", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(50));
  waitForStoreTime(m->store(), lock.expiresAt());
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(ExpiryAndWait, AcquireLockTimesOutCloseToItsTimeout) {
  auto holder = manager();
  auto waiter = manager();
  Lock held = holder->getLockInstance("busy", LockLevel::DC);
  asOwner("holder", [&] { holder->tryAcquireLock(held); });
  Lock wanted = waiter->getLockInstance("busy", LockLevel::DC);
  const auto start = steady_clock::now();
  EXPECT_EQ(codeOf([&] {
              waiter->acquireLock(wanted, milliseconds(1000),
                                  milliseconds(350));
            }),
            ErrorCode::LOCK_UNAVAILABLE);
  const auto waited =
      std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
  EXPECT_GE(waited, milliseconds(350));
  EXPECT_LT(waited, milliseconds(350 + 250))
      << "the last attempt is at the deadline, not a full sleep later";
}

TEST_P(ExpiryAndWait, TimeoutZeroIsOneAttempt) {
  auto holder = manager();
  auto waiter = manager();
  Lock held = holder->getLockInstance("z", LockLevel::DC);
  asOwner("holder", [&] { holder->tryAcquireLock(held); });
  Lock wanted = waiter->getLockInstance("z", LockLevel::DC);
  EXPECT_EQ(codeOf([&] {
              waiter->acquireLock(wanted, milliseconds(1000), milliseconds(0));
            }),
            ErrorCode::LOCK_UNAVAILABLE);
  ASSERT_TRUE(holder->releaseLock(held));
  waiter->acquireLock(wanted, milliseconds(1000), milliseconds(0));
  EXPECT_TRUE(wanted.isAcquired());
}

TEST_P(ExpiryAndWait, AcquireLockSucceedsSoonAfterARelease) {
  const SchedulingLag lag;
  auto holder = manager();
  auto waiter = manager();  // sleepBetweenRetries = 20 ms
  Lock held = holder->getLockInstance("handoff", LockLevel::DC);
  asOwner("holder", [&] { holder->tryAcquireLock(held); });
  steady_clock::time_point released;
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(200));
    released = steady_clock::now();
    EXPECT_TRUE(holder->releaseLock(held));
  });
  Lock wanted = waiter->getLockInstance("handoff", LockLevel::DC);
  waiter->acquireLock(wanted, milliseconds(1000), milliseconds(5000));
  const auto got = steady_clock::now();
  releaser.join();
  EXPECT_TRUE(wanted.isAcquired());
  // sleepBetweenRetries and a call, plus what this machine's scheduling adds
  // to the wake-ups on the way (the releaser's, the waiter's, the server's).
  const auto bound = milliseconds(20 + 200) + lag.slack(4);
  EXPECT_LT(got - released, bound)
      << "a waiter tries again within sleepBetweenRetries (bound "
      << bound.count() << " ms with " << lag.slack(4).count()
      << " ms of scheduling slack)";
}

TEST_P(ExpiryAndWait, WaiterTakesALockWhoseHolderCrashedOnceItExpires) {
  auto crashed = manager();
  auto waiter = manager();
  Lock held = crashed->getLockInstance("orphan", LockLevel::DC);
  asOwner("crashed", [&] { crashed->tryAcquireLock(held, milliseconds(300)); });
  crashed.reset();  // never released
  Lock wanted = waiter->getLockInstance("orphan", LockLevel::DC);
  waiter->acquireLock(wanted, milliseconds(1000), milliseconds(5000));
  EXPECT_TRUE(wanted.isAcquired());
}

INSTANTIATE_TEST_SUITE_P(Stores, ExpiryAndWait,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
