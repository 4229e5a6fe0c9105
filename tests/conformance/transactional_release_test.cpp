// commitLock / rollbackLock with the application's own transaction, and
// extendLock.
#include <thread>

#include "conformance/store_fixture.h"
#include "support/joining_thread.h"
#include "support/owners.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using TransactionalRelease = StoreConformance;

bool isFree(DistributedLockManager& m, const Lock& lock) {
  return !m.describeLock(lock).has_value();
}

TEST_P(TransactionalRelease, CommitLockFreesTheLockWhenTheApplicationCommits) {
  auto m = manager();
  Lock lock = m->getLockInstance("order-1", LockLevel::DC);
  m->tryAcquireLock(lock);
  auto app = env().beginAppTransaction();
  app->write("order-1 shipped");
  m->commitLock(lock, app->adapter());
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_TRUE(lock.isReleasePending());
  app->commit();
  EXPECT_TRUE(isFree(*m, lock));
  EXPECT_TRUE(env().appRowExists("order-1 shipped"));
  // Someone else can take it now.
  auto other = manager();
  Lock next = other->getLockInstance("order-1", LockLevel::DC);
  other->tryAcquireLock(next);
  EXPECT_EQ(next.fencingToken(), 2);
}

TEST_P(TransactionalRelease,
       ApplicationRollbackKeepsTheLockHeldUntilRollbackLock) {
  auto m = manager();
  Lock lock = m->getLockInstance("order-2", LockLevel::DC);
  m->tryAcquireLock(lock);
  {
    auto app = env().beginAppTransaction();
    app->write("order-2 shipped");
    m->commitLock(lock, app->adapter());
    app->rollback();
  }
  EXPECT_FALSE(isFree(*m, lock)) << "the release rolled back with the work";
  EXPECT_FALSE(env().appRowExists("order-2 shipped"));
  auto other = manager();
  Lock rival = other->getLockInstance("order-2", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { other->tryAcquireLock(rival); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_TRUE(m->rollbackLock(lock));
  EXPECT_FALSE(lock.isReleasePending());
  EXPECT_TRUE(isFree(*m, lock));
  EXPECT_FALSE(m->rollbackLock(lock)) << "nothing left to release";
}

// The release in the library's own transaction must wait for the hold's
// row (PostgreSQL) or the file's write lock (SQLite), which the
// application's transaction keeps until it ends: the call says so at once
// (no retries of a wait that cannot end while that transaction is open) and
// works once the application commits or rolls back.
TEST_P(TransactionalRelease,
       RollbackLockWhileTheApplicationTransactionIsOpenSaysToEndItFirst) {
  LockConfiguration config = fastConfig();
  if (GetParam() == "sqlite") {
    // SQLite waits for the write lock until the call's deadline.
    config.operationTimeout = milliseconds(500);
  } else {
    // A retry would pause 2 s first (and the deadline allows it): a call
    // back sooner made one attempt, one rowLockWait (50 ms), however busy
    // the machine.
    config.storeRetryBackoff = milliseconds(2000);
    config.operationTimeout = milliseconds(10000);
  }
  auto m = manager("", "farm1", config);
  for (const bool commit : {false, true}) {
    Lock lock = m->getLockInstance(commit ? "order-7c" : "order-7r",
                                   LockLevel::DC);
    m->tryAcquireLock(lock);
    auto app = env().beginAppTransaction();
    app->write("order-7 shipped");
    m->commitLock(lock, app->adapter());
    for (const bool viaRelease : {false, true}) {
      const auto started = std::chrono::steady_clock::now();
      const DLMException e = errorOf([&] {
        if (viaRelease) {
          m->releaseLock(lock);
        } else {
          m->rollbackLock(lock);
        }
      });
      const auto took = std::chrono::steady_clock::now() - started;
      EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
      EXPECT_NE(std::string(e.what()).find("commit or roll back"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("commitLock"), std::string::npos)
          << e.what();
      if (GetParam() != "sqlite") {
        // One attempt, not storeRetries more with backoff.
        EXPECT_LT(took, config.storeRetryBackoff) << e.what();
      }
      EXPECT_TRUE(lock.isReleasePending()) << "the call may be repeated";
    }
    if (commit) {
      app->commit();
      // The application's commit released it; the call finds it freed.
      EXPECT_NO_THROW(m->rollbackLock(lock));
    } else {
      app->rollback();
      EXPECT_TRUE(m->rollbackLock(lock));
    }
    EXPECT_FALSE(lock.isReleasePending());
    EXPECT_TRUE(isFree(*m, lock));
  }
}

TEST_P(TransactionalRelease, RollbackLockWithoutCommitLockReleases) {
  auto m = manager();
  Lock lock = m->getLockInstance("order-3", LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_TRUE(m->rollbackLock(lock));
  EXPECT_TRUE(isFree(*m, lock));
}

TEST_P(TransactionalRelease,
       CommitLockOnALockTakenOverMakesTheApplicationCommitFail) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("order-4", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(100));
  waitForStoreTime(m->store(), lock.expiresAt());
  Lock taker = rival->getLockInstance("order-4", LockLevel::DC);
  rival->tryAcquireLock(taker);
  // (SQLite: the application's transaction holds the file's write lock, so
  // it starts after the takeover.)
  auto app = env().beginAppTransaction();
  app->write("order-4 work done without the lock");
  EXPECT_EQ(codeOf([&] { m->commitLock(lock, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_FALSE(lock.isReleasePending());
  bool committed = true;
  try {
    app->commit();
  } catch (const std::exception&) {
    committed = false;
  }
  EXPECT_FALSE(committed) << "the application's commit must fail";
  EXPECT_FALSE(env().appRowExists("order-4 work done without the lock"));
  // The new holder keeps the lock.
  auto row = rival->describeLock(taker);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->fencingToken, taker.fencingToken());
}

TEST_P(TransactionalRelease, SharedHoldsCommitAndRollBackEachOnTheirOwn) {
  auto m = manager();
  auto other = manager();
  Lock mine = m->getLockInstance("catalog-1", LockLevel::DC, LockMode::SHARED);
  Lock theirs =
      other->getLockInstance("catalog-1", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(mine);
  other->tryAcquireLock(theirs);
  {
    // Rolled back: this reader's hold stays, as does the other's.
    auto app = env().beginAppTransaction();
    app->write("catalog-1 read A");
    m->commitLock(mine, app->adapter());
    app->rollback();
  }
  EXPECT_EQ(m->describeHolders(mine).size(), 2u);
  EXPECT_TRUE(m->rollbackLock(mine));
  EXPECT_EQ(m->describeHolders(mine).size(), 1u);
  {
    // Committed: the other reader's hold goes with the application's work.
    auto app = env().beginAppTransaction();
    app->write("catalog-1 read B");
    other->commitLock(theirs, app->adapter());
    app->commit();
  }
  EXPECT_TRUE(env().appRowExists("catalog-1 read B"));
  EXPECT_TRUE(isFree(*m, mine));
  // A SHARED hold taken over after expiry dooms the application's commit.
  m->tryAcquireLock(mine, milliseconds(100));
  waitForStoreTime(m->store(), mine.expiresAt());
  Lock writer = other->getLockInstance("catalog-1", LockLevel::DC);
  other->tryAcquireLock(writer);
  auto app = env().beginAppTransaction();
  app->write("catalog-1 read without the lock");
  EXPECT_EQ(codeOf([&] { m->commitLock(mine, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  bool committed = true;
  try {
    app->commit();
  } catch (const std::exception&) {
    committed = false;
  }
  EXPECT_FALSE(committed) << "the application's commit must fail";
  EXPECT_FALSE(env().appRowExists("catalog-1 read without the lock"));
}

TEST_P(TransactionalRelease, CommitLockNeedsAHeldHandle) {
  auto m = manager();
  Lock lock = m->getLockInstance("order-5", LockLevel::DC);
  auto app = env().beginAppTransaction();
  EXPECT_EQ(codeOf([&] { m->commitLock(lock, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
}

TEST_P(TransactionalRelease, CommitLockWakesAWaiterWhenTheTransactionCommits) {
  LockConfiguration slow = fastConfig();
  slow.sleepBetweenRetries = std::chrono::seconds(30);
  auto m = manager();
  auto waiterManager = manager("", "farm1", slow);
  Lock lock = m->getLockInstance("order-6", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(lock); });
  Lock wanted = waiterManager->getLockInstance("order-6", LockLevel::DC);
  JoiningThread waiter([&] {
    waiterManager->acquireLock(wanted, milliseconds(5000),
                               std::chrono::seconds(20));
  });
  std::this_thread::sleep_for(milliseconds(300));  // the waiter sleeps now
  auto app = env().beginAppTransaction();
  m->commitLock(lock, app->adapter());
  app->commit();
  const auto committed = std::chrono::steady_clock::now();
  waiter.join();
  EXPECT_TRUE(wanted.isAcquired());
  EXPECT_LT(std::chrono::steady_clock::now() - committed,
            std::chrono::seconds(10))
      << "woken by the commit, not by the 30 s poll";
}

TEST_P(TransactionalRelease, ExtendLockMovesTheExpiry) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("long-job", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(300));
  const StoreTime first = lock.expiresAt();
  m->extendLock(lock, std::chrono::seconds(30));
  EXPECT_GT(lock.expiresAt(), first + std::chrono::seconds(20));
  waitForStoreTime(m->store(), first + milliseconds(50));
  Lock late = rival->getLockInstance("long-job", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(late); }),
            ErrorCode::LOCK_UNAVAILABLE)
      << "still held after the original TTL";
}

TEST_P(TransactionalRelease, ExtendingAnExpiredUntakenLockWorks) {
  auto m = manager();
  Lock lock = m->getLockInstance("lapsed-job", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(50));
  waitForStoreTime(m->store(), lock.expiresAt());
  m->extendLock(lock, std::chrono::seconds(30));
  EXPECT_TRUE(lock.isAcquired());
  auto row = m->describeLock(lock);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->fencingToken, lock.fencingToken());
}

TEST_P(TransactionalRelease, ExtendAfterTakeoverIsLockNotHeld) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("taken-job", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(50));
  waitForStoreTime(m->store(), lock.expiresAt());
  Lock taker = rival->getLockInstance("taken-job", LockLevel::DC);
  rival->tryAcquireLock(taker);
  EXPECT_EQ(codeOf([&] { m->extendLock(lock); }), ErrorCode::LOCK_NOT_HELD);
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_TRUE(rival->describeLock(taker).has_value());
  Lock never = m->getLockInstance("never-held", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->extendLock(never); }), ErrorCode::LOCK_NOT_HELD);
}

INSTANTIATE_TEST_SUITE_P(Stores, TransactionalRelease,
                         ::testing::ValuesIn(appTransactionStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
