// The manager's waiting policy against the in-memory store: request rows,
// deadlock detection before any sleep, wake-up, jitter, commitLock, guards.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>

#include "dlm/dlm.h"
#include "dlm/lock_store_wrapper.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/fake_clock.h"
#include "support/fake_store.h"
#include "support/joining_thread.h"
#include "support/owners.h"

namespace dlm {
namespace {

using std::chrono::milliseconds;
using test::asOwner;
using test::codeOf;
using test::FakeClock;
using test::FakeStore;
using test::FakeTransaction;

class WaitingTest : public ::testing::Test {
 protected:
  WaitingTest()
      : fake_(std::make_shared<FakeStore>()),
        clock_(std::make_shared<FakeClock>()) {
    config_.sleepBetweenRetries = milliseconds(1000);
    config_.waitForLock = milliseconds(2500);
    config_.retryJitter = 0;
  }

  // On fake_, or on `store` (a decorator of fake_) when given.
  std::unique_ptr<DistributedLockManager> manager(
      bool fakeClock = true, std::shared_ptr<LockStore> store = nullptr) {
    auto b = DistributedLockManager::builder()
                 .clientId("svc")
                 .farmId("farm1")
                 .store(store ? std::move(store) : fake_)
                 .configuration(config_);
    if (fakeClock) b.clock(clock_);
    auto m = b.build();
    m->initialize();
    return m;
  }

  std::shared_ptr<FakeStore> fake_;
  std::shared_ptr<FakeClock> clock_;
  LockConfiguration config_;
};

TEST_F(WaitingTest, DeadlockIsThrownBeforeAnySleepAndLeavesNoRequest) {
  auto m = manager();
  Lock x = m->getLockInstance("x", LockLevel::DC);
  Lock y = m->getLockInstance("y", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(x); });
  m->tryAcquireLock(y);  // this thread's owner holds y
  // "a" waits for y (its request row is live).
  ASSERT_TRUE(fake_
                  ->registerWait(WaitRequest{StoreKey{y.storeKey(), {}, "", ""},
                                             "a", std::chrono::seconds(60)})
                  .deadlockCycle.empty());
  Lock wantX = m->getLockInstance("x", LockLevel::DC);
  try {
    m->acquireLock(wantX);
    ADD_FAILURE() << "no deadlock reported";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::DEADLOCK_DETECTED);
    const std::string what = e.what();
    EXPECT_NE(what.find(x.storeKey()), std::string::npos) << what;
    EXPECT_NE(what.find(y.storeKey()), std::string::npos) << what;
  }
  EXPECT_TRUE(clock_->sleeps().empty());
  EXPECT_EQ(fake_->requests().size(), 1U) << "only a's request is left";
}

TEST_F(WaitingTest, TheRequestRowLivesExactlyAsLongAsTheWait) {
  auto m = manager();
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  std::vector<std::size_t> seen;
  clock_->onSleep(
      [&](milliseconds) { seen.push_back(fake_->requests().size()); });
  Lock wanted = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wanted); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 1, 1}));
  EXPECT_TRUE(fake_->requests().empty());
  // And after a successful wait.
  clock_->onSleep([&](milliseconds) {
    if (held.isAcquired()) asOwner("a", [&] { m->releaseLock(held); });
  });
  m->acquireLock(wanted);
  EXPECT_TRUE(wanted.isAcquired());
  EXPECT_TRUE(fake_->requests().empty());
}

TEST_F(WaitingTest, JitterShortensSleepsButNeverLengthensThem) {
  config_.retryJitter = 0.2;
  config_.waitForLock = milliseconds(20000);
  auto m = manager();
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  Lock wanted = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wanted); }),
            ErrorCode::LOCK_UNAVAILABLE);
  const auto sleeps = clock_->sleeps();
  ASSERT_GE(sleeps.size(), 20U);
  bool varied = false;
  milliseconds elapsed{0};
  const auto renewalAt = [](milliseconds t) {
    return t % (kRequestLease / 2) == milliseconds(0);
  };
  for (std::size_t i = 0; i + 1 < sleeps.size(); ++i) {  // the last is cut
    const milliseconds start = elapsed;
    elapsed += sleeps[i];
    // A sleep is split in two where the request's lease is renewed (every
    // kRequestLease / 2 from the registration, on this clock).
    if (!renewalAt(elapsed) && !(i > 0 && renewalAt(start))) {
      EXPECT_GE(sleeps[i], milliseconds(800)) << i;
    }
    EXPECT_LE(sleeps[i], milliseconds(1000));
    varied = varied || sleeps[i] != sleeps[0];
  }
  EXPECT_TRUE(varied) << "every sleep the same: no jitter";
}

TEST_F(WaitingTest, AWaitRenewsItsRequestWithinItsLease) {
  config_.waitForLock = milliseconds(30000);
  auto m = manager();
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  Lock wanted = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wanted); }),
            ErrorCode::LOCK_UNAVAILABLE);
  // Registered at the start and again every kRequestLease / 2, each time
  // for at most kRequestLease: a waiter that stops renewing (it crashed)
  // stops counting within kRequestLease.
  const auto waits = fake_->registeredWaits();
  EXPECT_GE(waits.size(), 6U);
  for (const milliseconds w : waits) EXPECT_LE(w, kRequestLease);
  EXPECT_TRUE(fake_->requests().empty());
}

// A store whose registerWait fails as an unreachable server would, after
// the first one (the renewals).
class UnreachableRenewals final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  WaitRegistration registerWait(const WaitRequest& request) override {
    if (registrations_++ > 0) {
      throw DLMException(ErrorCode::CONNECTION_ERROR, "server unreachable",
                         true);
    }
    return LockStoreWrapper::registerWait(request);
  }
  int registrations() const { return registrations_; }

 private:
  int registrations_ = 0;
};

TEST_F(WaitingTest, ARenewalThatCannotReachTheStoreDoesNotEndTheWait) {
  config_.sleepBetweenRetries = milliseconds(30000);  // no attempt meanwhile
  config_.waitForLock = milliseconds(40000);
  config_.storeRetries = 0;
  auto store = std::make_shared<UnreachableRenewals>(fake_);
  auto m = manager(true, store);
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  Lock wanted = m->getLockInstance("x", LockLevel::DC);
  // At the first attempt after 30 s the holder is gone; the renewals due
  // at 5 s, 6 s, ... all failed meanwhile.
  clock_->onSleep([&](milliseconds) {
    if (store->registrations() > 3 && held.isAcquired()) {
      asOwner("a", [&] { m->releaseLock(held); });
    }
  });
  EXPECT_NO_THROW(m->acquireLock(wanted));
  EXPECT_TRUE(wanted.isAcquired());
  EXPECT_GT(store->registrations(), 3);
}

// UnreachableRenewals that counts unregisterWait calls (made by the
// waiting thread or the manager's background thread).
class CountedUnregisters final : public LockStoreWrapper {
 public:
  explicit CountedUnregisters(std::shared_ptr<UnreachableRenewals> target)
      : LockStoreWrapper(target), renewals_(*target) {}
  void unregisterWait(std::string_view key, std::string_view owner) override {
    ++unregistrations;
    LockStoreWrapper::unregisterWait(key, owner);
  }
  int registrations() const { return renewals_.registrations(); }
  std::atomic<int> unregistrations{0};

 private:
  UnreachableRenewals& renewals_;
};

// The row is still the wait's own: a failed renewal does not hand it to
// the background deletion of rows that waits left behind.
TEST_F(WaitingTest, ARenewalThatCannotReachTheStoreKeepsTheRequestRow) {
  config_.sleepBetweenRetries = milliseconds(30000);
  config_.waitForLock = milliseconds(40000);
  config_.storeRetries = 0;
  auto store = std::make_shared<CountedUnregisters>(
      std::make_shared<UnreachableRenewals>(fake_));
  auto m = manager(true, store);
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  Lock wanted = m->getLockInstance("x", LockLevel::DC);
  bool deletedWhileWaiting = false;
  bool rowKept = false;
  clock_->onSleep([&](milliseconds) {
    if (store->registrations() < 2 || !held.isAcquired()) return;
    // A renewal failed: give a background deletion the time to come.
    deletedWhileWaiting = test::eventually(
        [&] { return store->unregistrations > 0; }, milliseconds(500));
    rowKept = fake_->requests().size() == 1;
    asOwner("a", [&] { m->releaseLock(held); });
  });
  EXPECT_NO_THROW(m->acquireLock(wanted));
  EXPECT_FALSE(deletedWhileWaiting);
  EXPECT_TRUE(rowKept);
}

// A store whose next registerWait records the row and then fails, as a
// PostgreSQL registration does when the connection breaks between its two
// transactions.
class FailAfterRecording final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  WaitRegistration registerWait(const WaitRequest& request) override {
    WaitRegistration r = LockStoreWrapper::registerWait(request);
    if (failNext) {
      failNext = false;
      throw DLMException(ErrorCode::CONNECTION_ERROR, "connection lost", true);
    }
    return r;
  }
  bool failNext = false;
};

TEST_F(WaitingTest, ARequestLeftByAFailedRegistrationIsNoDeadlockLater) {
  config_.storeRetries = 0;
  config_.waitForLock = milliseconds(500);
  auto store = std::make_shared<FailAfterRecording>(fake_);
  auto m = manager(true, store);
  Lock x = m->getLockInstance("x", LockLevel::DC);
  Lock z = m->getLockInstance("z", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(x, std::chrono::hours(1)); });
  asOwner("b", [&] { m->tryAcquireLock(z, std::chrono::hours(1)); });
  // This thread's wait for x fails after its request row was written.
  store->failNext = true;
  Lock wantX = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wantX); }),
            ErrorCode::CONNECTION_ERROR);
  // b, holding z, waits for x behind that (older) request.
  ASSERT_TRUE(fake_
                  ->registerWait(WaitRequest{StoreKey{x.storeKey(), {}, "", ""},
                                             "b", std::chrono::seconds(60)})
                  .deadlockCycle.empty());
  // Waiting for z would close a cycle only through the leftover request:
  // it is removed, and the wait runs to its timeout.
  Lock wantZ = m->getLockInstance("z", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wantZ); }),
            ErrorCode::LOCK_UNAVAILABLE);
}

// A store that cannot subscribe the manager to release announcements at
// first (its LISTEN connection failed), then can.
class SubscribesLater final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  bool subscribeReleases(ReleaseListener* listener) override {
    ++asked;
    return refuse ? false : LockStoreWrapper::subscribeReleases(listener);
  }
  int asked = 0;
  bool refuse = true;
};

// A failed subscription leaves the waiters polling, and is tried again at
// a wait 30 s later, not at every wait and not never.
TEST_F(WaitingTest, AFailedSubscriptionIsTriedAgainAfterAWhile) {
  config_.waitForLock = milliseconds(0);  // one attempt, no sleep
  auto store = std::make_shared<SubscribesLater>(fake_);
  auto m = manager(true, store);
  Lock held = m->getLockInstance("x", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(held, std::chrono::hours(1)); });
  const auto waitOnce = [&] {
    Lock wanted = m->getLockInstance("x", LockLevel::DC);
    asOwner("b", [&] {
      EXPECT_EQ(codeOf([&] {
                  m->acquireLock(wanted, std::chrono::hours(1),
                                 milliseconds(1));
                }),
                ErrorCode::LOCK_UNAVAILABLE);
    });
  };
  waitOnce();
  EXPECT_EQ(store->asked, 1);
  clock_->sleepFor(milliseconds(29000));
  waitOnce();
  EXPECT_EQ(store->asked, 1) << "asked again before 30 s";
  store->refuse = false;
  clock_->sleepFor(milliseconds(2000));
  waitOnce();
  EXPECT_EQ(store->asked, 2);
  clock_->sleepFor(milliseconds(60000));
  waitOnce();
  EXPECT_EQ(store->asked, 2) << "a subscription that worked is kept";
}

TEST_F(WaitingTest, RetryJitterMustBeBetweenZeroAndAHalf) {
  for (double bad : {-0.1, 0.6, std::nan("")}) {
    config_.retryJitter = bad;
    EXPECT_EQ(codeOf([&] { manager(); }), ErrorCode::INVALID_ARGUMENT) << bad;
  }
}

TEST_F(WaitingTest, AReleaseEndsTheSleepAndPollingRemainsTheFallback) {
  config_.sleepBetweenRetries = std::chrono::seconds(60);
  config_.waitForLock = std::chrono::seconds(120);
  for (bool notifies : {true, false}) {
    fake_->setNotifies(notifies);
    if (!notifies) config_.sleepBetweenRetries = milliseconds(50);
    auto m = manager(/*fakeClock=*/false);
    Lock held = m->getLockInstance("x", LockLevel::DC);
    asOwner("a", [&] { m->tryAcquireLock(held); });
    Lock wanted = m->getLockInstance("x", LockLevel::DC);
    const auto start = std::chrono::steady_clock::now();
    {
      test::JoiningThread waiter([&] { m->acquireLock(wanted); });
      std::this_thread::sleep_for(milliseconds(100));
      ASSERT_TRUE(m->releaseLock(held));
    }
    EXPECT_TRUE(wanted.isAcquired()) << notifies;
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(30))
        << "notifies=" << notifies;
    m->releaseLock(wanted);
  }
}

TEST_F(WaitingTest, CommitLockReleasesOnlyWhenTheTransactionCommits) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  FakeTransaction rolledBack;
  m->commitLock(lock, rolledBack);
  EXPECT_TRUE(lock.isReleasePending());
  rolledBack.rollback();
  EXPECT_TRUE(fake_->describe(lock.storeKey())->held);
  EXPECT_TRUE(m->rollbackLock(lock));
  EXPECT_FALSE(fake_->describe(lock.storeKey())->held);

  m->tryAcquireLock(lock);
  FakeTransaction committed;
  m->commitLock(lock, committed);
  EXPECT_TRUE(fake_->describe(lock.storeKey())->held);
  committed.commit();
  EXPECT_FALSE(fake_->describe(lock.storeKey())->held);
}

TEST_F(WaitingTest, CommitLockAfterTakeoverDoomsTheTransaction) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(100));
  fake_->advance(milliseconds(200));
  Lock taker = m->getLockInstance("x", LockLevel::DC);
  asOwner("b", [&] { m->tryAcquireLock(taker); });
  FakeTransaction tx;
  EXPECT_EQ(codeOf([&] { m->commitLock(lock, tx); }), ErrorCode::LOCK_NOT_HELD);
  EXPECT_TRUE(tx.doomed());
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_FALSE(lock.isReleasePending());
}

TEST_F(WaitingTest, GuardWithinKeepsTheHandleAndDoomsTheTransactionWhenLost) {
  auto m = manager();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  FakeTransaction none;
  EXPECT_EQ(codeOf([&] { m->guardWithin(lock, none); }),
            ErrorCode::LOCK_NOT_HELD)
      << "a handle that holds nothing";
  EXPECT_FALSE(none.doomed()) << "refused before the store";

  m->tryAcquireLock(lock, milliseconds(100));
  FakeTransaction guarded;
  m->guardWithin(lock, guarded);
  EXPECT_FALSE(guarded.doomed());
  EXPECT_TRUE(lock.isAcquired());
  EXPECT_FALSE(lock.isReleasePending());

  // The lease ends, nobody takes the lock: the guard refuses, the handle
  // still holds it and can release it.
  fake_->advance(milliseconds(200));
  FakeTransaction late;
  EXPECT_EQ(codeOf([&] { m->guardWithin(lock, late); }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_TRUE(late.doomed());
  EXPECT_TRUE(lock.isAcquired());
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST_F(WaitingTest, WithLockReportsALockLostWhileTheBodyRan) {
  auto m = manager();
  EXPECT_EQ(codeOf([&] {
              m->withLock("x", LockLevel::DC, [&](const Lock& lock) {
                // An operator frees it and someone else takes it.
                fake_->forceRelease(lock.storeKey());
                Lock taker = m->getLockInstance("x", LockLevel::DC);
                asOwner("b", [&] { m->tryAcquireLock(taker); });
              });
            }),
            ErrorCode::LOCK_NOT_HELD);
}

TEST_F(WaitingTest, LockGuardMoveAssignmentReleasesWhatItHeld) {
  auto m = manager();
  Lock a = m->getLockInstance("a", LockLevel::DC);
  Lock b = m->getLockInstance("b", LockLevel::DC);
  m->tryAcquireLock(a);
  m->tryAcquireLock(b);
  const std::string keyA = a.storeKey();
  LockGuard ga(*m, std::move(a), KeepAliveOptions{false, {}});
  LockGuard gb(*m, std::move(b), KeepAliveOptions{false, {}});
  ga = std::move(gb);
  EXPECT_FALSE(fake_->describe(keyA)->held);
  EXPECT_TRUE(ga.holdsLock());
  EXPECT_TRUE(ga.release());
  EXPECT_FALSE(ga.holdsLock());
  EXPECT_FALSE(ga.release()) << "an empty guard releases nothing";
}

}  // namespace
}  // namespace dlm
