// guardWithin: the application's transaction commits only while the lock is
// held, and no takeover gets in before that transaction ends. Also the
// takeover of expired holds of other keys (ancestors, descendants), which a
// guard on them relies on.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;

class GuardedWrites : public StoreConformance {
 protected:
  // A short operationTimeout, so that a rival held back on SQLite gives up
  // soon.
  static LockConfiguration rivalConfig() {
    LockConfiguration c = fastConfig();
    c.operationTimeout = milliseconds(600);
    c.storeRetries = 0;
    return c;
  }
};

// A rival's attempt on a key whose expired hold is guarded by an open
// transaction: PostgreSQL waits for the hold's row (rowLockWait), SQLite for
// the file's write lock (busyTimeout, cut by the call's deadline).
ErrorCode expectedWhileGuarded(const std::string& store) {
  return store == "sqlite" ? ErrorCode::RETRIES_EXHAUSTED
                           : ErrorCode::LOCK_UNAVAILABLE;
}

TEST_P(GuardedWrites, AGuardedTransactionCommitsAndTheLockStaysHeld) {
  auto m = manager();
  Lock lock = m->getLockInstance("invoice-1", LockLevel::DC);
  m->tryAcquireLock(lock);
  auto app = env().beginAppTransaction();
  m->guardWithin(lock, app->adapter());
  app->write("invoice-1 paid");
  app->commit();
  EXPECT_TRUE(env().appRowExists("invoice-1 paid"));
  EXPECT_TRUE(lock.isAcquired());
  ASSERT_TRUE(m->describeLock(lock).has_value()) << "still held";
  // Guarded again in a second transaction, rolled back this time: the lock
  // is still held afterwards.
  {
    auto again = env().beginAppTransaction();
    m->guardWithin(lock, again->adapter());
    again->write("invoice-1 refunded");
    again->rollback();
  }
  EXPECT_FALSE(env().appRowExists("invoice-1 refunded"));
  EXPECT_TRUE(m->describeLock(lock).has_value());
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(GuardedWrites, AGuardOnAnEndedLeaseRefusesAndTheTransactionCannotCommit) {
  auto m = manager();
  Lock lock = m->getLockInstance("invoice-2", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(100));
  waitForStoreTime(m->store(), lock.expiresAt());
  auto app = env().beginAppTransaction();
  app->write("invoice-2 paid");
  EXPECT_EQ(codeOf([&] { m->guardWithin(lock, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_ANY_THROW(app->commit());
  EXPECT_FALSE(env().appRowExists("invoice-2 paid"));
  // Nobody took it over: the handle may still release it.
  EXPECT_TRUE(lock.isAcquired());
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(GuardedWrites, AGuardAfterATakeoverRefusesAndOnlyTheNewHolderWrites) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("invoice-3", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(100));
  waitForStoreTime(m->store(), lock.expiresAt());
  Lock taker = rival->getLockInstance("invoice-3", LockLevel::DC);
  rival->tryAcquireLock(taker);
  {
    auto theirs = env().beginAppTransaction();
    rival->guardWithin(taker, theirs->adapter());
    theirs->write("invoice-3 by the new holder");
    theirs->commit();
  }
  auto app = env().beginAppTransaction();
  app->write("invoice-3 by the old holder");
  EXPECT_EQ(codeOf([&] { m->guardWithin(lock, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_ANY_THROW(app->commit());
  EXPECT_TRUE(env().appRowExists("invoice-3 by the new holder"));
  EXPECT_FALSE(env().appRowExists("invoice-3 by the old holder"));
  EXPECT_FALSE(m->releaseLock(lock)) << "taken over: nothing to release";
}

TEST_P(GuardedWrites, ATakeoverWaitsForTheGuardedTransactionThenSucceeds) {
  auto m = manager();
  auto rival = manager("", "farm1", rivalConfig());
  Lock lock = m->getLockInstance("invoice-4", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(300));
  auto app = env().beginAppTransaction();
  m->guardWithin(lock, app->adapter());
  waitForStoreTime(m->store(), lock.expiresAt());
  Lock taker = rival->getLockInstance("invoice-4", LockLevel::DC);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(taker); }),
            expectedWhileGuarded(GetParam()));
  EXPECT_LT(std::chrono::steady_clock::now() - started,
            rivalConfig().operationTimeout + std::chrono::seconds(1))
      << "bounded by the call's deadline";
  app->write("invoice-4 paid");
  app->commit();
  EXPECT_TRUE(env().appRowExists("invoice-4 paid"));
  // The guard is gone with its transaction: the expired lease is taken.
  rival->tryAcquireLock(taker);
  EXPECT_TRUE(taker.isAcquired());
  EXPECT_FALSE(m->releaseLock(lock));
}

// PostgreSQL: the EXCLUSIVE guard (FOR SHARE on the key's row) holds back
// the holder's own renewal until the transaction ends; a SHARED guard (FOR
// KEY SHARE on the hold's own row) lets its holder's renewal through.
TEST_P(GuardedWrites, AnExclusiveRenewalWaitsForTheGuardASharedOneDoesNot) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "SQLite: the guarded transaction holds the file's write "
                    "lock, which every dlm write waits for (documented)";
  }
  auto m = manager("", "farm1", rivalConfig());
  Lock lock = m->getLockInstance("invoice-5", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(5000));
  Lock reader = m->getLockInstance("invoice-5r", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(reader, milliseconds(5000));
  auto app = env().beginAppTransaction();
  m->guardWithin(lock, app->adapter());
  m->guardWithin(reader, app->adapter());
  EXPECT_EQ(codeOf([&] { m->extendLock(lock, milliseconds(10000)); }),
            ErrorCode::RETRIES_EXHAUSTED)
      << "the key's row is the guard's until the transaction ends";
  EXPECT_TRUE(lock.isAcquired());
  const StoreTime readerBefore = reader.expiresAt();
  std::this_thread::sleep_for(milliseconds(5));
  m->extendLock(reader, milliseconds(10000));
  EXPECT_GT(reader.expiresAt(), readerBefore);
  app->write("invoice-5 paid");
  app->commit();
  EXPECT_TRUE(env().appRowExists("invoice-5 paid"));
  const StoreTime before = lock.expiresAt();
  m->extendLock(lock, milliseconds(10000));
  EXPECT_GT(lock.expiresAt(), before);
  EXPECT_TRUE(m->releaseLock(lock));
  EXPECT_TRUE(m->releaseLock(reader));
}

TEST_P(GuardedWrites, SharedCoHoldersGuardAtTheSameTime) {
  if (GetParam() == "sqlite") {
    GTEST_SKIP() << "SQLite: one writing transaction at a time on a file";
  }
  auto a = manager();
  auto b = manager();
  Lock first = a->getLockInstance("catalog", LockLevel::DC, LockMode::SHARED);
  Lock second = b->getLockInstance("catalog", LockLevel::DC, LockMode::SHARED);
  a->tryAcquireLock(first);
  b->tryAcquireLock(second);
  auto one = env().beginAppTransaction();
  auto two = env().beginAppTransaction();
  a->guardWithin(first, one->adapter());
  b->guardWithin(second, two->adapter());
  one->write("catalog read 1");
  two->write("catalog read 2");
  one->commit();
  two->commit();
  EXPECT_TRUE(env().appRowExists("catalog read 1"));
  EXPECT_TRUE(env().appRowExists("catalog read 2"));
  EXPECT_TRUE(a->releaseLock(first));
  EXPECT_TRUE(b->releaseLock(second));
}

TEST_P(GuardedWrites, AGuardedSharedHoldHoldsBackAnExclusiveTakeover) {
  auto m = manager();
  auto rival = manager("", "farm1", rivalConfig());
  Lock reader = m->getLockInstance("report", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(reader, milliseconds(300));
  auto app = env().beginAppTransaction();
  m->guardWithin(reader, app->adapter());
  waitForStoreTime(m->store(), reader.expiresAt());
  Lock writer = rival->getLockInstance("report", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(writer); }),
            expectedWhileGuarded(GetParam()));
  app->commit();
  rival->tryAcquireLock(writer);
  EXPECT_TRUE(writer.isAcquired());
  EXPECT_FALSE(m->releaseLock(reader));
}

TEST_P(GuardedWrites, AGuardOnAParentHoldsBackATakeoverThroughAChild) {
  auto m = manager();
  auto rival = manager("", "farm1", rivalConfig());
  Lock parent = m->getLockInstance("tree.a", LockLevel::DC);
  m->tryAcquireLock(parent, milliseconds(300));
  auto app = env().beginAppTransaction();
  m->guardWithin(parent, app->adapter());
  waitForStoreTime(m->store(), parent.expiresAt());
  Lock child = rival->getLockInstance("tree.a.b", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(child); }),
            expectedWhileGuarded(GetParam()));
  Lock root = rival->getLockInstance("tree", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(root); }),
            expectedWhileGuarded(GetParam()));
  app->write("tree.a written");
  app->commit();
  rival->tryAcquireLock(child);
  EXPECT_TRUE(child.isAcquired());
  EXPECT_EQ(codeOf([&] { m->extendLock(parent); }), ErrorCode::LOCK_NOT_HELD)
      << "taken over through its child";
}

TEST_P(GuardedWrites, GuardingNeedsAHeldLockAndThisStoresTransaction) {
  auto m = manager();
  Lock never = m->getLockInstance("never-held", LockLevel::DC);
  auto app = env().beginAppTransaction();
  EXPECT_EQ(codeOf([&] { m->guardWithin(never, app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  app->rollback();
  Lock lock = m->getLockInstance("invoice-6", LockLevel::DC);
  m->tryAcquireLock(lock);
  struct Foreign final : AppTransaction {};
  Foreign foreign;
  EXPECT_EQ(codeOf([&] { m->guardWithin(lock, foreign); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_P(GuardedWrites, TheClusteredLockServiceGuardsThisOwnersLock) {
  auto m = manager();
  ClusteredLockService service(*m);  // XDC locks
  ASSERT_TRUE(service.getLock("ledger", milliseconds(30000)));
  {
    auto app = env().beginAppTransaction();
    service.guardWithin("ledger", app->adapter());
    app->write("ledger posted");
    app->commit();
  }
  EXPECT_TRUE(env().appRowExists("ledger posted"));
  EXPECT_TRUE(service.holdsLock("ledger")) << "still held after the guard";
  auto app = env().beginAppTransaction();
  EXPECT_EQ(codeOf([&] { service.guardWithin("not-mine", app->adapter()); }),
            ErrorCode::LOCK_NOT_HELD);
  app->rollback();
  EXPECT_TRUE(service.releaseLock("ledger"));
}

// Without guards: an expired hold that an acquisition of a child or a parent
// passed over is taken over, so its holder cannot extend it back to life
// beside the new holder.
TEST_P(GuardedWrites, AnExpiredParentPassedOverByAChildIsTakenOver) {
  auto m = manager();
  auto rival = manager();
  Lock parent = m->getLockInstance("shelf.a", LockLevel::DC);
  m->tryAcquireLock(parent, milliseconds(50));
  waitForStoreTime(m->store(), parent.expiresAt());
  Lock child = rival->getLockInstance("shelf.a.b", LockLevel::DC);
  rival->tryAcquireLock(child);
  EXPECT_EQ(codeOf([&] { m->extendLock(parent); }), ErrorCode::LOCK_NOT_HELD);
  EXPECT_TRUE(rival->describeLock(child).has_value());
}

TEST_P(GuardedWrites, AnExpiredChildPassedOverByAParentIsTakenOver) {
  auto m = manager();
  auto rival = manager();
  Lock child = m->getLockInstance("rack.a.b", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(child, milliseconds(50));
  waitForStoreTime(m->store(), child.expiresAt());
  Lock parent = rival->getLockInstance("rack.a", LockLevel::DC);
  rival->tryAcquireLock(parent);
  EXPECT_EQ(codeOf([&] { m->extendLock(child); }), ErrorCode::LOCK_NOT_HELD);
  EXPECT_FALSE(m->releaseLock(child));
}

// Acquirers of children of one expired parent race to take its hold over
// (PostgreSQL: each holds the parent's row FOR SHARE and wants it FOR
// UPDATE); waiting calls all get their child.
TEST_P(GuardedWrites, ChildrenOfAnExpiredParentAreAllGranted) {
  auto m = manager();
  Lock parent = m->getLockInstance("hall.a", LockLevel::DC);
  m->tryAcquireLock(parent, milliseconds(50));
  waitForStoreTime(m->store(), parent.expiresAt());
  std::vector<std::unique_ptr<DistributedLockManager>> rivals;
  for (int i = 0; i < 4; ++i) rivals.push_back(manager());
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  std::mutex errorsMutex;
  std::string errors;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      try {
        Lock child = rivals[static_cast<std::size_t>(i)]->getLockInstance(
            "hall.a.c" + std::to_string(i), LockLevel::DC);
        rivals[static_cast<std::size_t>(i)]->acquireLock(
            child, std::chrono::seconds(30), std::chrono::seconds(20));
        if (child.isAcquired()) ++granted;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> guard(errorsMutex);
        errors += std::string(e.what()) + "\n";
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 4) << errors;
  EXPECT_EQ(codeOf([&] { m->extendLock(parent); }), ErrorCode::LOCK_NOT_HELD);
}

TEST_P(GuardedWrites, ASharedAttemptLeavesExpiredSharedHoldsOfOtherKeys) {
  auto m = manager();
  auto rival = manager();
  Lock parent = m->getLockInstance("bin.a", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(parent, milliseconds(50));
  waitForStoreTime(m->store(), parent.expiresAt());
  Lock child = rival->getLockInstance("bin.a.b", LockLevel::DC, LockMode::SHARED);
  rival->tryAcquireLock(child);
  // No conflict, so nothing was taken over: the expired hold is extended.
  m->extendLock(parent);
  EXPECT_TRUE(parent.isAcquired());
}

INSTANTIATE_TEST_SUITE_P(Stores, GuardedWrites,
                         ::testing::ValuesIn(appTransactionStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
