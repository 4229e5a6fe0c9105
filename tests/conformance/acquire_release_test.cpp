// Acquire, release and scoping: the behaviour users rely on, on every store.
#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/counting_store.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using AcquireRelease = StoreConformance;

TEST_P(AcquireRelease, TryAcquireOnAFreeKeySucceeds) {
  auto m = manager();
  Lock lock = m->getLockInstance("order-1", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(5000));
  EXPECT_TRUE(lock.isAcquired());
  EXPECT_EQ(lock.owner().size(), 36U);
  EXPECT_GE(lock.fencingToken(), 1);
  EXPECT_EQ(lock.expiresAt() - lock.acquiredAt(), milliseconds(5000));
  const auto row = adminOf(m->store()).describe(lock.storeKey());
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->held);
  EXPECT_EQ(row->owner, m->listedOwner(lock.owner()));
  EXPECT_EQ(row->fencingToken, lock.fencingToken());
  EXPECT_EQ(row->holder.pid, static_cast<std::int64_t>(getpid()));
  EXPECT_FALSE(row->holder.host.empty());
}

TEST_P(AcquireRelease, TryAcquireOnAHeldKeyIsUnavailable) {
  auto a = manager();
  auto b = manager();  // same client, another instance of the service
  Lock mine = a->getLockInstance("order-1", LockLevel::DC);
  Lock theirs = b->getLockInstance("order-1", LockLevel::DC);
  a->tryAcquireLock(mine);
  EXPECT_EQ(codeOf([&] { b->tryAcquireLock(theirs); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_FALSE(theirs.isAcquired());
}

TEST_P(AcquireRelease, IsNotReentrantThroughTheSameOrAnotherHandle) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  const auto fencing = lock.fencingToken();
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_TRUE(lock.isAcquired());
  EXPECT_EQ(lock.fencingToken(), fencing);
  Lock second = m->getLockInstance("x", LockLevel::DC);  // same thread
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(second); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_TRUE(adminOf(m->store()).describe(lock.storeKey())->held);
}

TEST_P(AcquireRelease, ReleaseReturnsTrueOnlyForAHeldHandle) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  EXPECT_FALSE(m->releaseLock(lock));  // never acquired
  m->tryAcquireLock(lock);
  EXPECT_TRUE(m->releaseLock(lock));
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_FALSE(m->releaseLock(lock));  // already released
  EXPECT_FALSE(adminOf(m->store()).describe(lock.storeKey())->held);
  Lock again = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(again);  // free again
  EXPECT_TRUE(m->releaseLock(again));
}

TEST_P(AcquireRelease, ReleasedRowStaysWithStatusFree) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  const std::string key = lock.storeKey();
  ASSERT_TRUE(m->releaseLock(lock));
  const auto row = adminOf(m->store()).describe(key);
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->statusHeld);
  EXPECT_TRUE(adminOf(m->store()).listHeld(key).empty());
}

TEST_P(AcquireRelease, FencingTokensStartAtOneAndGrowByOnePerAcquisition) {
  auto m = manager();
  std::int64_t previous = 0;
  for (int i = 0; i < 5; ++i) {
    Lock lock = m->getLockInstance("fenced", LockLevel::DC);
    m->tryAcquireLock(lock);
    EXPECT_EQ(lock.fencingToken(), previous + 1);
    previous = lock.fencingToken();
    ASSERT_TRUE(m->releaseLock(lock));
  }
  EXPECT_EQ(previous, 5);
}

TEST_P(AcquireRelease, ClientsFarmsAndLevelsNeverCollide) {
  auto a = manager(client("A"), "farm1");
  auto b = manager(client("B"), "farm1");
  auto a2 = manager(client("A"), "farm2");
  Lock aDc = a->getLockInstance("shared", LockLevel::DC);
  Lock bDc = b->getLockInstance("shared", LockLevel::DC);
  Lock a2Dc = a2->getLockInstance("shared", LockLevel::DC);
  Lock aXdc = a->getLockInstance("shared", LockLevel::XDC);
  a->tryAcquireLock(aDc);
  b->tryAcquireLock(bDc);    // other client
  a2->tryAcquireLock(a2Dc);  // other farm
  a->tryAcquireLock(aXdc);   // other level
  EXPECT_TRUE(aDc.isAcquired() && bDc.isAcquired() && a2Dc.isAcquired() &&
              aXdc.isAcquired());
  // XDC ignores the farm: client A on farm2 is blocked by A's XDC lock.
  Lock a2Xdc = a2->getLockInstance("shared", LockLevel::XDC);
  EXPECT_EQ(codeOf([&] { a2->tryAcquireLock(a2Xdc); }),
            ErrorCode::LOCK_UNAVAILABLE);
}

TEST_P(AcquireRelease, IdsAreCaseSensitiveBytes) {
  auto m = manager();
  Lock lower = m->getLockInstance("job", LockLevel::DC);
  Lock upper = m->getLockInstance("JOB", LockLevel::DC);
  Lock unicode = m->getLockInstance(
      "j\xC3\xB6"
      "b",
      LockLevel::DC);
  m->tryAcquireLock(lower);
  m->tryAcquireLock(upper);
  m->tryAcquireLock(unicode);
  EXPECT_TRUE(upper.isAcquired() && unicode.isAcquired());
}

TEST_P(AcquireRelease, QuotesAndSqlInIdsAreJustBytes) {
  auto m = manager();
  const std::string nasty = "x'); DROP TABLE dlm_locks; --\"\\{},";
  Lock lock = m->getLockInstance(nasty, LockLevel::DC);
  m->tryAcquireLock(lock);
  const auto row = adminOf(m->store()).describe(lock.storeKey());
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->key, lock.storeKey());
  Lock other = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(other);  // unrelated key still works
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(AcquireRelease, LongestIdWorks) {
  auto m = manager();
  Lock lock = m->getLockInstance(std::string(1024, 'k'), LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(AcquireRelease, ListHeldNamesTheHolder) {
  auto m = manager();
  Lock lock = m->getLockInstance("listed", LockLevel::DC);
  m->tryAcquireLock(lock);
  const auto held =
      adminOf(m->store()).listHeld("DC#farm1#" + m->clientId() + "#");
  ASSERT_EQ(held.size(), 1U);
  EXPECT_EQ(held[0].key, lock.storeKey());
  EXPECT_EQ(held[0].owner, m->listedOwner(lock.owner()));
  EXPECT_TRUE(held[0].held);
}

TEST_P(AcquireRelease, ForceReleaseFreesAnyHolderAndTheHolderThenGetsFalse) {
  auto m = manager();
  Lock lock = m->getLockInstance("stuck", LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_TRUE(adminOf(m->store()).forceRelease(lock.storeKey()));
  EXPECT_FALSE(adminOf(m->store()).forceRelease(lock.storeKey()));
  Lock next = m->getLockInstance("stuck", LockLevel::DC);
  m->tryAcquireLock(next);
  EXPECT_FALSE(m->releaseLock(lock));  // the old holder cannot free `next`
  EXPECT_TRUE(adminOf(m->store()).describe(next.storeKey())->held);
}

TEST_P(AcquireRelease, ValidationFailsBeforeAnyIo) {
  auto counting = std::make_shared<CountingStore>(env().newStore());
  auto m = DistributedLockManager::builder()
               .clientId(client())
               .farmId("farm1")
               .store(counting)
               .build();
  m->initialize();
  const int before = counting->calls;
  for (const std::string& id : invalidLockIds()) {
    EXPECT_EQ(codeOf([&] { m->getLockInstance(id, LockLevel::DC); }),
              ErrorCode::INVALID_ARGUMENT);
  }
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock, milliseconds(0)); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock, milliseconds(-1)); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(
      codeOf([&] { m->acquireLock(lock, milliseconds(10), milliseconds(-1)); }),
      ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(counting->calls, before);
  EXPECT_FALSE(adminOf(m->store()).describe(lock.storeKey()).has_value());
}

INSTANTIATE_TEST_SUITE_P(Stores, AcquireRelease,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
