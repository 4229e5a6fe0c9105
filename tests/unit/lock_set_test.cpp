// Several locks at once through the manager (tryAcquireAll, acquireAll,
// releaseAll) against the in-memory fake store and a fake clock.
#include <gtest/gtest.h>

#include "dlm/dlm.h"
#include "support/error_code.h"
#include "support/fake_clock.h"
#include "support/fake_store.h"

namespace dlm {
namespace {

using std::chrono::milliseconds;
using test::codeOf;
using test::FakeClock;
using test::FakeStore;

class LockSetTest : public ::testing::Test {
 protected:
  LockSetTest()
      : store_(std::make_shared<FakeStore>()),
        clock_(std::make_shared<FakeClock>()) {
    config_.sleepBetweenRetries = milliseconds(1000);
    config_.retryJitter = 0;
  }

  std::unique_ptr<DistributedLockManager> manager() {
    auto m = DistributedLockManager::builder()
                 .clientId("svc")
                 .farmId("farm1")
                 .store(store_)
                 .configuration(config_)
                 .clock(clock_)
                 .build();
    m->initialize();
    return m;
  }

  std::shared_ptr<FakeStore> store_;
  std::shared_ptr<FakeClock> clock_;
  LockConfiguration config_;
};

TEST_F(LockSetTest, TakesEveryLockWithItsOwnFencingTokenAndReleasesThemInOneCall) {
  auto m = manager();
  Lock a = m->getLockInstance("accounts.17");
  Lock b = m->getLockInstance("accounts.42");
  m->tryAcquireAll({&b, &a});
  EXPECT_TRUE(a.isAcquired());
  EXPECT_TRUE(b.isAcquired());
  EXPECT_GT(a.fencingToken(), 0);
  EXPECT_GT(b.fencingToken(), 0);
  // Held: another handle of the same key is refused.
  Lock again = m->getLockInstance("accounts.17");
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(again); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_EQ(m->releaseAll({&a, &b}), 2u);
  EXPECT_FALSE(a.isAcquired());
  EXPECT_FALSE(b.isAcquired());
  m->tryAcquireLock(again);
  EXPECT_TRUE(m->releaseLock(again));
}

TEST_F(LockSetTest, OneKeyHeldElsewhereTakesNoneAndNamesIt) {
  auto m = manager();
  auto other = manager();
  Lock held = other->getLockInstance("accounts.42");
  other->tryAcquireLock(held);
  Lock a = m->getLockInstance("accounts.17");
  Lock b = m->getLockInstance("accounts.42");
  try {
    m->tryAcquireAll({&a, &b});
    FAIL() << "tryAcquireAll took a set with a held key";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE);
    EXPECT_NE(std::string(e.what()).find(held.key()), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(a.isAcquired());
  EXPECT_FALSE(b.isAcquired());
  // None taken: the free key of the set is free.
  Lock free = other->getLockInstance("accounts.17");
  other->tryAcquireLock(free);
  EXPECT_TRUE(other->releaseLock(free));
  EXPECT_TRUE(other->releaseLock(held));
}

TEST_F(LockSetTest, RefusesEmptyDuplicateNullAndHeldHandlesBeforeAnyCall) {
  auto m = manager();
  Lock a = m->getLockInstance("accounts.17");
  Lock same = m->getLockInstance("accounts.17");
  EXPECT_EQ(codeOf([&] { m->tryAcquireAll({}); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { m->tryAcquireAll({&a, &same}); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { m->tryAcquireAll({&a, nullptr}); }),
            ErrorCode::INVALID_ARGUMENT);
  m->tryAcquireLock(a);
  Lock b = m->getLockInstance("accounts.42");
  EXPECT_EQ(codeOf([&] { m->tryAcquireAll({&a, &b}); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_FALSE(b.isAcquired());
  EXPECT_TRUE(m->releaseLock(a));
}

}  // namespace
}  // namespace dlm
