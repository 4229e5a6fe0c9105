// Time bounds against the in-memory store: every call ends by its deadline,
// in-doubt outcomes are resolved by token, a manager's destroy() wakes its
// waiters, keep-alive notices a hung store without waiting for it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dlm/dlm.h"
#include "dlm/lock_store_wrapper.h"
#include "support/counting_store.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/fake_clock.h"
#include "support/fake_store.h"
#include "support/joining_thread.h"
#include "support/owners.h"
#include "support/recorded_events.h"
#include "support/single_call_batches.h"

namespace dlm {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::asOwner;
using test::codeOf;
using test::eventually;
using test::FakeStore;

milliseconds since(steady_clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

DLMException noAnswer() {
  return DLMException(ErrorCode::CONNECTION_ERROR, "test: no answer", true);
}

// Injects the faults of a store that stops answering, loses replies or
// loses a lazily committed release.
class FaultyStore final : public test::SingleCallBatches {
 public:
  using SingleCallBatches::SingleCallBatches;

  // Every call waits for its deadline (at most 10 s without one), then
  // fails as a silent server's would.
  std::atomic<bool> hang{false};
  // Every call fails at once (a server that refuses connections).
  std::atomic<bool> refuse{false};
  // tryAcquire runs in the store, then its reply is lost.
  std::atomic<bool> loseAcquireReply{false};
  // release answers true without freeing the row (a crash undid it).
  std::atomic<bool> undoReleases{false};
  // release frees the row, another owner takes the key, and the reply is
  // lost (once).
  std::atomic<bool> loseReleaseReplyAndTakeOver{false};
  // When set, release fails for every thread but this one (the manager's
  // background resolver cannot get through).
  std::atomic<std::thread::id> releasesOnlyFrom{};
  std::atomic<int> registrations{0};
  std::atomic<ReleaseListener*> listener{nullptr};

  AcquireResult tryAcquire(const AcquireRequest& r) override {
    fault();
    AcquireResult result = LockStoreWrapper::tryAcquire(r);
    if (loseAcquireReply) throw noAnswer();
    return result;
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    fault();
    if (releasesOnlyFrom.load() != std::thread::id() &&
        releasesOnlyFrom.load() != std::this_thread::get_id()) {
      throw noAnswer();
    }
    if (undoReleases) return true;
    const bool freed = LockStoreWrapper::release(key, token, mode);
    if (loseReleaseReplyAndTakeOver.exchange(false)) {
      const Holder holder{"elsewhere", 1};
      LockStoreWrapper::tryAcquire(
          AcquireRequest{key, "someone-else", "their-token",
                         std::chrono::seconds(90), holder});
      throw noAnswer();
    }
    return freed;
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  milliseconds ttl, LockMode mode) override {
    fault();
    return LockStoreWrapper::extend(key, token, ttl, mode);
  }
  std::optional<LockRecord> describe(std::string_view key) override {
    fault();
    return LockStoreWrapper::describe(key);
  }
  std::vector<LockRecord> holdersOf(std::string_view key) override {
    fault();
    return LockStoreWrapper::holdersOf(key);
  }
  WaitRegistration registerWait(const WaitRequest& request) override {
    fault();
    ++registrations;
    return LockStoreWrapper::registerWait(request);
  }
  bool subscribeReleases(ReleaseListener* l) override {
    listener = l;
    return LockStoreWrapper::subscribeReleases(l);
  }

 private:
  void fault() {
    if (refuse) throw noAnswer();
    if (!hang) return;
    const Deadline until =
        currentDeadline().value_or(deadlineAfter(std::chrono::seconds(10)));
    std::this_thread::sleep_until(until);
    throw noAnswer();
  }
};

class BoundedTimeTest : public ::testing::Test {
 protected:
  BoundedTimeTest()
      : fake_(std::make_shared<FakeStore>()),
        faulty_(std::make_shared<FaultyStore>(fake_)) {
    config_.operationTimeout = milliseconds(300);
    config_.sleepBetweenRetries = milliseconds(50);
    config_.retryJitter = 0;
    config_.storeRetryBackoff = milliseconds(20);
  }

  std::unique_ptr<DistributedLockManager> manager(
      std::shared_ptr<LockStore> store = nullptr) {
    auto m = DistributedLockManager::builder()
                 .clientId("svc")
                 .farmId("farm1")
                 .store(store ? store : faulty_)
                 .configuration(config_)
                 .build();
    m->initialize();
    return m;
  }

  bool heldInStore(const Lock& lock) {
    auto row = fake_->describe(lock.storeKey());
    return row && row->held;
  }

  std::shared_ptr<FakeStore> fake_;
  std::shared_ptr<FaultyStore> faulty_;
  LockConfiguration config_;
};

TEST_F(BoundedTimeTest, EveryCallEndsByItsDeadlineWhenTheStoreHangs) {
  auto m = manager();
  Lock held = m->getLockInstance("held", LockLevel::DC);
  m->tryAcquireLock(held);
  faulty_->hang = true;
  const milliseconds bound = config_.operationTimeout + milliseconds(200);

  Lock lock = m->getLockInstance("x", LockLevel::DC);
  auto start = steady_clock::now();
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock); }),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_LT(since(start), bound);

  start = steady_clock::now();
  EXPECT_EQ(codeOf([&] {
              m->acquireLock(lock, milliseconds(1000), milliseconds(400));
            }),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_LT(since(start), milliseconds(400) + bound);

  for (auto call :
       {+[](DistributedLockManager&mm, Lock&l) { mm.releaseLock(l); },
        +[](DistributedLockManager&mm, Lock&l) { mm.extendLock(l); },
        +[](DistributedLockManager&mm, Lock&l) { mm.describeLock(l); }}) {
    start = steady_clock::now();
    EXPECT_EQ(codeOf([&] { call(*m, held); }), ErrorCode::CONNECTION_ERROR);
    EXPECT_LT(since(start), bound);
  }
  EXPECT_TRUE(held.isAcquired()) << "a failed release keeps the handle";
}

TEST_F(BoundedTimeTest, RetriesStopAtTheDeadlineWhateverTheRetrySettings) {
  config_.storeRetries = LockConfiguration::kMaxStoreRetries;
  config_.storeRetryBackoff = LockConfiguration::kMaxRetryBackoff;
  auto m = manager();
  faulty_->refuse = true;
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  const auto start = steady_clock::now();
  EXPECT_EQ(codeOf([&] {
              m->acquireLock(lock, milliseconds(1000), milliseconds(100));
            }),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_LT(since(start),
            milliseconds(100) + config_.operationTimeout + milliseconds(200));
}

TEST(RetryBackoff, DoublesUpToItsCapAndNeverOverflows) {
  auto fake = std::make_shared<FakeStore>();
  auto counting = std::make_shared<test::CountingStore>(fake);
  auto clock = std::make_shared<test::FakeClock>();
  LockConfiguration config;
  config.storeRetries = 70;  // 2^70 * 50 ms would overflow
  config.operationTimeout = LockConfiguration::kMaxOperationTimeout;
  auto m = DistributedLockManager::builder()
               .clientId("svc")
               .farmId("farm1")
               .store(counting)
               .configuration(config)
               .clock(clock)
               .build();
  m->initialize();
  for (int i = 0; i < 71; ++i) counting->failNext(noAnswer());
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock); }),
            ErrorCode::CONNECTION_ERROR);
  const auto sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 70U);
  EXPECT_EQ(sleeps[0], milliseconds(50));
  EXPECT_EQ(sleeps[1], milliseconds(100));
  for (auto s : sleeps) {
    EXPECT_GT(s, milliseconds(0));
    EXPECT_LE(s, LockConfiguration::kMaxRetryPause);
  }
  EXPECT_EQ(sleeps.back(), LockConfiguration::kMaxRetryPause);
}

TEST(LockConfigurationBounds, RejectsRetrySettingsThatCouldNotBeHonoured) {
  LockConfiguration c;
  c.storeRetries = LockConfiguration::kMaxStoreRetries + 1;
  EXPECT_EQ(codeOf([&] { c.validate(); }), ErrorCode::INVALID_ARGUMENT);
  c = LockConfiguration{};
  c.storeRetryBackoff = LockConfiguration::kMaxRetryBackoff + milliseconds(1);
  EXPECT_EQ(codeOf([&] { c.validate(); }), ErrorCode::INVALID_ARGUMENT);
  c = LockConfiguration{};
  c.operationTimeout = milliseconds(0);
  EXPECT_EQ(codeOf([&] { c.validate(); }), ErrorCode::INVALID_ARGUMENT);
  c.operationTimeout =
      LockConfiguration::kMaxOperationTimeout + milliseconds(1);
  EXPECT_EQ(codeOf([&] { c.validate(); }), ErrorCode::INVALID_ARGUMENT);
}

TEST_F(BoundedTimeTest, AnAcquireWhoseReplyWasLostIsReleasedByToken) {
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  faulty_->loseAcquireReply = true;
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock, std::chrono::seconds(90)); }),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_FALSE(lock.isAcquired());
  faulty_->loseAcquireReply = false;
  // The store committed it; the manager frees it long before the 90 s TTL.
  EXPECT_TRUE(
      eventually([&] { return !heldInStore(lock); }, milliseconds(2000)));
  m->tryAcquireLock(lock);
  EXPECT_TRUE(lock.isAcquired());
}

TEST_F(BoundedTimeTest, OwnInDoubtLeftoverIsNoDeadlockForTheNextAcquire) {
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  // The reply is lost, and the manager's background release cannot get
  // through, so only the next attempt can free the leftover.
  faulty_->releasesOnlyFrom = std::this_thread::get_id();
  faulty_->loseAcquireReply = true;
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock, std::chrono::seconds(90)); }),
            ErrorCode::CONNECTION_ERROR);
  faulty_->loseAcquireReply = false;
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(heldInStore(lock));
  // The same thread's next acquireLock is neither a deadlock nor a wait for
  // the TTL.
  m->acquireLock(lock, std::chrono::seconds(90), milliseconds(2000));
  EXPECT_TRUE(lock.isAcquired());
}

TEST_F(BoundedTimeTest, AReleaseUndoneByACrashDoesNotLockOutItsOwner) {
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, std::chrono::seconds(90));
  const std::int64_t first = lock.fencingToken();
  faulty_->undoReleases = true;
  EXPECT_TRUE(m->releaseLock(lock));
  faulty_->undoReleases = false;
  ASSERT_TRUE(heldInStore(lock)) << "the fault did not keep the row held";
  // One try: the leftover is released by its token, then taken again.
  m->tryAcquireLock(lock);
  EXPECT_EQ(lock.fencingToken(), first + 1);
  EXPECT_TRUE(m->releaseLock(lock));

  // And a wait is no deadlock either.
  m->tryAcquireLock(lock, std::chrono::seconds(90));
  faulty_->undoReleases = true;
  EXPECT_TRUE(m->releaseLock(lock));
  faulty_->undoReleases = false;
  m->acquireLock(lock, std::chrono::seconds(90), milliseconds(2000));
  EXPECT_TRUE(lock.isAcquired());
}

TEST_F(BoundedTimeTest,
       AReleaseWhoseReplyWasLostIsTrueEvenIfTheKeyWasTakenSince) {
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, std::chrono::seconds(90));
  faulty_->loseReleaseReplyAndTakeOver = true;
  // The retry finds the key held by someone else: that is because the first
  // try freed it while the lease was valid, not because it expired.
  EXPECT_TRUE(m->releaseLock(lock));
  EXPECT_FALSE(lock.isAcquired());
  EXPECT_EQ(fake_->describe(lock.storeKey())->owner, "someone-else");
}

TEST_F(BoundedTimeTest, AnUndoneReleaseClosingACycleThroughOthersIsNoDeadlock) {
  auto m = manager();
  // This thread's release of x is undone (a crash): its owner still holds x.
  Lock x = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(x, std::chrono::seconds(90));
  faulty_->undoReleases = true;
  EXPECT_TRUE(m->releaseLock(x));
  faulty_->undoReleases = false;
  // Another owner holds y and waits for x.
  std::atomic<bool> otherGotX{false};
  Lock y = m->getLockInstance("y", LockLevel::DC);
  asOwner("other", [&] { m->tryAcquireLock(y, std::chrono::seconds(90)); });
  test::JoiningThread other([&] {
    asOwner("other", [&] {
      Lock ox = m->getLockInstance("x", LockLevel::DC);
      try {
        m->acquireLock(ox, std::chrono::seconds(90), std::chrono::seconds(5));
        otherGotX = true;
        m->releaseLock(ox);
      } catch (const DLMException&) {
        // Reported below through otherGotX.
      }
      m->releaseLock(y);
    });
  });
  ASSERT_TRUE(eventually([&] { return fake_->requests().size() == 1; }));
  // Waiting for y closes the cycle y -> other -> x -> this owner, but only
  // through the leftover: it is released by token, and the wait goes on.
  Lock mine = m->getLockInstance("y", LockLevel::DC);
  m->acquireLock(mine, std::chrono::seconds(90), std::chrono::seconds(5));
  EXPECT_TRUE(mine.isAcquired());
  EXPECT_TRUE(otherGotX);
}

TEST_F(BoundedTimeTest, AHeldLockOfTheSameOwnerIsStillADeadlock) {
  auto m = manager();
  Lock mine = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(mine);
  Lock again = m->getLockInstance("job", LockLevel::DC);
  EXPECT_EQ(codeOf([&] {
              m->acquireLock(again, milliseconds(1000), milliseconds(500));
            }),
            ErrorCode::DEADLOCK_DETECTED);
}

TEST_F(BoundedTimeTest, DestroyWakesEveryWaiterAtOnce) {
  config_.sleepBetweenRetries = std::chrono::seconds(30);
  auto m = manager();
  Lock held = m->getLockInstance("job", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  std::atomic<int> code{-1};
  std::atomic<long> tookMs{-1};
  std::vector<std::unique_ptr<test::JoiningThread>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::make_unique<test::JoiningThread>([&] {
      Lock l = m->getLockInstance("job", LockLevel::DC);
      const auto start = steady_clock::now();
      code = static_cast<int>(codeOf([&] {
        m->acquireLock(l, milliseconds(1000), std::chrono::seconds(60));
      }));
      tookMs = std::max<long>(tookMs, since(start).count());
    }));
  }
  ASSERT_TRUE(eventually([&] { return fake_->requests().size() == 3; }));
  const auto destroyed = steady_clock::now();
  m->destroy();
  waiters.clear();  // joins
  EXPECT_EQ(code, static_cast<int>(ErrorCode::INTERNAL_ERROR));
  EXPECT_LT(since(destroyed), milliseconds(1000));
}

TEST_F(BoundedTimeTest, StopWaitingEndsWaitsAndLeavesHeldLocksAlone) {
  config_.sleepBetweenRetries = std::chrono::seconds(30);
  auto m = manager();
  Lock held = m->getLockInstance("job", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  std::atomic<int> code{-1};
  std::string message;
  std::unique_ptr<test::JoiningThread> waiter =
      std::make_unique<test::JoiningThread>([&] {
        Lock l = m->getLockInstance("job", LockLevel::DC);
        try {
          m->acquireLock(l, milliseconds(1000), std::chrono::seconds(60));
          code = 0;
        } catch (const DLMException& e) {
          message = e.what();
          code = static_cast<int>(e.code());
        }
      });
  ASSERT_TRUE(eventually([&] { return fake_->requests().size() == 1; }));
  const auto stopped = steady_clock::now();
  m->stopWaiting();
  waiter.reset();  // joins
  EXPECT_EQ(code, static_cast<int>(ErrorCode::LOCK_UNAVAILABLE));
  EXPECT_NE(message.find("waiting was stopped"), std::string::npos) << message;
  EXPECT_LT(since(stopped), milliseconds(1000));
  EXPECT_TRUE(fake_->requests().empty());

  // Later waits are single attempts; held locks are untouched.
  Lock again = m->getLockInstance("job", LockLevel::DC);
  const auto start = steady_clock::now();
  EXPECT_EQ(codeOf([&] {
              m->acquireLock(again, milliseconds(1000),
                             std::chrono::seconds(60));
            }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_LT(since(start), milliseconds(1000));
  Lock free = m->getLockInstance("other", LockLevel::DC);
  m->acquireLock(free, milliseconds(1000), std::chrono::seconds(60));
  EXPECT_TRUE(held.isAcquired());
  m->extendLock(held);
  EXPECT_TRUE(m->releaseLock(held));
  EXPECT_TRUE(m->releaseLock(free));
}

TEST_F(BoundedTimeTest, ASharedStoreIsClosedOnlyByItsLastManager) {
  class ClosingStore final : public LockStoreWrapper {
   public:
    using LockStoreWrapper::LockStoreWrapper;
    std::atomic<int> closes{0};
    void close() override { ++closes; }
  };
  auto store = std::make_shared<ClosingStore>(fake_);
  auto a = manager(store);
  auto b = manager(store);
  a->destroy();
  EXPECT_EQ(store->closes, 0);
  Lock lock = b->getLockInstance("job", LockLevel::DC);
  b->tryAcquireLock(lock);
  EXPECT_TRUE(b->releaseLock(lock));
  b->destroy();
  EXPECT_EQ(store->closes, 1);
}

TEST_F(BoundedTimeTest, AWaiterRecordsItsRequestAgainAfterMissedReleases) {
  config_.sleepBetweenRetries = std::chrono::seconds(30);
  auto m = manager();
  Lock held = m->getLockInstance("job", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  test::JoiningThread waiter([&] {
    asOwner("waiter", [&] {
      Lock l = m->getLockInstance("job", LockLevel::DC);
      m->acquireLock(l, milliseconds(1000), std::chrono::seconds(10));
      m->releaseLock(l);
    });
  });
  ASSERT_TRUE(eventually([&] { return fake_->requests().size() == 1; }));
  const int before = faulty_->registrations;
  // A server crash undid the request row, and the listening connection
  // reports that releases may have been missed.
  fake_->unregisterWait(held.storeKey(), "waiter");
  ASSERT_TRUE(fake_->requests().empty());
  ASSERT_NE(faulty_->listener.load(), nullptr);
  faulty_->listener.load()->missedReleases();
  EXPECT_TRUE(eventually([&] { return fake_->requests().size() == 1; }));
  EXPECT_EQ(faulty_->registrations, before + 1);
  asOwner("holder", [&] { m->releaseLock(held); });
}

TEST_F(BoundedTimeTest,
       KeepAliveDeclaresLossBeforeTheLeaseEndsWhileTheStoreHangs) {
  config_.operationTimeout = std::chrono::seconds(5);
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(900));
  const auto acquired = steady_clock::now();
  std::atomic<long> lostAfterMs{-1};
  KeepAliveOptions options;
  options.onLost = [&](const DLMException&) {
    lostAfterMs = since(acquired).count();
  };
  LockGuard guard(*m, std::move(lock), options);
  // Renewals from the first one on (at 300 ms) hang.
  faulty_->hang = true;
  ASSERT_TRUE(eventually([&] { return lostAfterMs >= 0; },
                         std::chrono::seconds(3), milliseconds(1)));
  // Before the 900 ms lease could end, i.e. before anyone else could take
  // it, and not before the margin (a tenth of the TTL).
  EXPECT_LT(lostAfterMs, 900);
  EXPECT_GE(lostAfterMs, 900 - 90 - 50);
  const auto start = steady_clock::now();
  EXPECT_TRUE(guard.lost());
  EXPECT_FALSE(guard.holdsLock());
  guard.expiresAt();
  EXPECT_LT(since(start), milliseconds(50));
  faulty_->hang = false;
}

// Wake-ups for a key that stays held (a forged NOTIFY dlm_release needs no
// dlm role): a flood of them gives a few attempts, not one per wake-up, and
// the waiter still gives up at its deadline.
TEST_F(BoundedTimeTest, AFloodOfWakeUpsCostsAFewAttemptsNotOneEach) {
  config_.sleepBetweenRetries = milliseconds(400);
  config_.retryJitter = 0;
  auto m = manager();
  Lock held = m->getLockInstance("job", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  const std::uint64_t refusedBefore = m->metrics().refusals;
  std::atomic<bool> waiting{true};
  std::atomic<long> wakeUps{0};
  test::JoiningThread flood([&] {
    while (waiting) {
      if (ReleaseListener* l = faulty_->listener.load()) {
        l->released(held.storeKey());
        ++wakeUps;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto start = steady_clock::now();
  asOwner("waiter", [&] {
    Lock l = m->getLockInstance("job", LockLevel::DC);
    EXPECT_EQ(test::codeOf([&] { m->acquireLock(l, milliseconds(1000),
                                                milliseconds(1500)); }),
              ErrorCode::LOCK_UNAVAILABLE);
  });
  waiting = false;
  EXPECT_LT(since(start), milliseconds(1500 + 1000));
  const std::uint64_t attempts = m->metrics().refusals - refusedBefore;
  // 1.5 s: the gap grows 1, 2, ... 64 ms, then 100 ms (a quarter of
  // sleepBetweenRetries, capped): about 20 attempts; thousands without.
  EXPECT_GT(wakeUps.load(), 1000) << "the flood did not reach the waiter";
  EXPECT_LT(attempts, 40U) << wakeUps.load() << " wake-ups";
  asOwner("holder", [&] { m->releaseLock(held); });
}

// Renewals the store refuses are STORE_ERROR events (one per failed try,
// naming the lock), then the loss is LEASE_LOST.
TEST_F(BoundedTimeTest, EachFailedRenewalIsAStoreErrorBeforeTheLeaseIsLost) {
  auto events = std::make_shared<test::RecordedEvents>();
  auto m = DistributedLockManager::builder()
               .clientId("svc")
               .farmId("farm1")
               .store(faulty_)
               .configuration(config_)
               .events(events)
               .build();
  m->initialize();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(900));
  const std::string key = lock.storeKey();
  LockGuard guard(*m, std::move(lock));
  faulty_->refuse = true;
  ASSERT_TRUE(eventually(
      [&] { return events->count(LockEventKind::LEASE_LOST) == 1; },
      std::chrono::seconds(3), milliseconds(1)));
  faulty_->refuse = false;
  const auto errors = events->of(LockEventKind::STORE_ERROR);
  ASSERT_GE(errors.size(), 2U) << "a renewal is retried while the lease lasts";
  for (const LockEvent& e : errors) {
    EXPECT_EQ(e.key, key);
    EXPECT_EQ(e.code, ErrorCode::CONNECTION_ERROR);
    EXPECT_NE(e.message.find("renewing"), std::string::npos) << e.message;
  }
  EXPECT_GE(m->metrics().storeErrors.at(ErrorCode::CONNECTION_ERROR),
            errors.size());
}

TEST_F(BoundedTimeTest, GuardAccessorsAnswerAtOnceWhileARenewalHangs) {
  config_.operationTimeout = std::chrono::seconds(5);
  auto m = manager();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, std::chrono::seconds(3));
  LockGuard guard(*m, std::move(lock));
  faulty_->hang = true;
  // The first renewal starts at 1 s and hangs until the loss time (2.7 s).
  std::this_thread::sleep_for(milliseconds(1300));
  const auto start = steady_clock::now();
  EXPECT_FALSE(guard.lost());
  EXPECT_TRUE(guard.holdsLock());
  guard.expiresAt();
  EXPECT_LT(since(start), milliseconds(50));
  faulty_->hang = false;
}

}  // namespace
}  // namespace dlm
