// Events and metrics (dlm/lock_events.h, dlm/lock_metrics.h) on the real
// stores: acquired, waiting (who blocks it, at the start and then at the
// configured interval), released, lease renewed and lost, deadlock, and a
// handler that throws. Store errors and reconnections are tested where the
// store can be made to fail (tests/postgres, tests/unit).
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/eventually.h"
#include "support/joining_thread.h"
#include "support/owners.h"
#include "support/recorded_events.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

class Events : public StoreConformance {};

TEST_P(Events, AcquiredAndReleasedCarryTheLockAndItsFencingToken) {
  auto events = std::make_shared<RecordedEvents>();
  auto m = observedManager(events);
  Lock lock = m->getLockInstance("report.a", LockLevel::DC, LockMode::SHARED);
  m->tryAcquireLock(lock);
  const std::int64_t fencing = lock.fencingToken();
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(m->releaseLock(lock));

  const auto acquired = events->of(LockEventKind::ACQUIRED);
  ASSERT_EQ(acquired.size(), 1U);
  EXPECT_EQ(acquired[0].lockId, lock.lockId());
  EXPECT_EQ(acquired[0].key, lock.storeKey());
  EXPECT_EQ(acquired[0].clientId, m->clientId());
  EXPECT_EQ(acquired[0].mode, LockMode::SHARED);
  EXPECT_EQ(acquired[0].fencingToken, fencing);
  EXPECT_EQ(acquired[0].attempts, 1);
  const auto released = events->of(LockEventKind::RELEASED);
  ASSERT_EQ(released.size(), 1U);
  EXPECT_EQ(released[0].fencingToken, fencing);
  EXPECT_GE(released[0].heldFor, 20ms);
  EXPECT_GE(released[0].at, acquired[0].at);

  const LockMetrics metrics = m->metrics();
  EXPECT_EQ(metrics.clientId, m->clientId());
  EXPECT_EQ(metrics.acquisitions, 1U);
  EXPECT_EQ(metrics.releases, 1U);
  EXPECT_EQ(metrics.acquireLatency.count, 1U);
  EXPECT_EQ(metrics.releaseLatency.count, 1U);
  EXPECT_EQ(metrics.waits, 0U);
}

TEST_P(Events, AWaitIsReportedAtItsStartAndThenAtTheIntervalNamingTheHolder) {
  auto holder = manager();
  Lock held = holder->getLockInstance("busy", LockLevel::DC);
  asOwner("the-holder", [&] { holder->tryAcquireLock(held); });

  auto events = std::make_shared<RecordedEvents>();
  LockConfiguration config = fastConfig();
  config.waitingReportInterval = 300ms;
  config.sleepBetweenRetries = 1s;  // longer: the reports must not wait
  auto m = observedManager(events, config);
  Lock wanted = m->getLockInstance("busy", LockLevel::DC);
  // The wait lasts until it was reported three times (at 0, 300 and 600 ms
  // on a free machine; later on a busy one, never sooner), then is stopped.
  ErrorCode code = ErrorCode::INTERNAL_ERROR;
  {
    JoiningThread waiter(
        [&] { code = codeOf([&] { m->acquireLock(wanted, 30s, 60s); }); });
    EXPECT_TRUE(eventually(
        [&] { return events->count(LockEventKind::WAITING) >= 3; }, 50s));
    m->stopWaiting();
  }
  EXPECT_EQ(code, ErrorCode::LOCK_UNAVAILABLE);

  const auto waiting = events->of(LockEventKind::WAITING);
  ASSERT_GE(waiting.size(), 3U);
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    SCOPED_TRACE(i);
    const LockEvent& e = waiting[i];
    EXPECT_EQ(e.lockId, wanted.lockId());
    ASSERT_TRUE(e.blocker.has_value());
    EXPECT_EQ(e.blocker->key, held.storeKey());
    EXPECT_FALSE(e.blocker->queued);
    EXPECT_EQ(e.blocker->owner, m->listedOwner("the-holder"));
    EXPECT_EQ(e.blocker->pid, static_cast<std::int64_t>(getpid()));
    EXPECT_FALSE(e.blocker->host.empty());
    EXPECT_TRUE(e.blocker->since.has_value());
    if (i > 0) {
      // At the interval, never more often (the event's time is read a
      // moment after the one the next report is timed from).
      EXPECT_GE(e.at - waiting[i - 1].at, 250ms) << "reported too often";
      EXPECT_GT(e.waited, waiting[i - 1].waited);
    }
  }
  EXPECT_EQ(waiting[0].waited, 0ms);
  EXPECT_EQ(events->count(LockEventKind::ACQUIRED), 0U);

  const LockMetrics metrics = m->metrics();
  EXPECT_EQ(metrics.waits, 1U);
  EXPECT_EQ(metrics.timeouts, 0U) << "stopped, not timed out";
  EXPECT_GE(metrics.refusals, 1U);
  EXPECT_EQ(metrics.waitLatency.count, 1U);
  EXPECT_GE(metrics.waitLatency.sumSeconds, 0.5) << "two intervals at least";
  EXPECT_EQ(metrics.acquisitions, 0U);
}

TEST_P(Events, AWaitThatTimesOutIsCountedAsATimeout) {
  auto holder = manager();
  Lock held = holder->getLockInstance("busy", LockLevel::DC);
  asOwner("the-holder", [&] { holder->tryAcquireLock(held); });
  auto events = std::make_shared<RecordedEvents>();
  auto m = observedManager(events, fastConfig());
  Lock wanted = m->getLockInstance("busy", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wanted, 30s, 100ms); }),
            ErrorCode::LOCK_UNAVAILABLE);
  const LockMetrics metrics = m->metrics();
  EXPECT_EQ(metrics.waits, 1U);
  EXPECT_EQ(metrics.timeouts, 1U);
  EXPECT_EQ(metrics.waitLatency.count, 1U);
  EXPECT_GT(metrics.waitLatency.sumSeconds, 0.0);
}

TEST_P(Events, AWaitThatEndsInAnAcquisitionCountsItsAttempts) {
  auto holder = manager();
  Lock held = holder->getLockInstance("soon", LockLevel::DC);
  asOwner("the-holder", [&] { holder->tryAcquireLock(held); });
  auto events = std::make_shared<RecordedEvents>();
  auto m = observedManager(events);
  std::thread releaser([&] {
    std::this_thread::sleep_for(200ms);
    holder->releaseLock(held);
  });
  Lock wanted = m->getLockInstance("soon", LockLevel::DC);
  m->acquireLock(wanted, 30s, 5s);
  releaser.join();
  const auto acquired = events->of(LockEventKind::ACQUIRED);
  ASSERT_EQ(acquired.size(), 1U);
  EXPECT_GE(acquired[0].attempts, 2);
  EXPECT_GE(acquired[0].waited, 150ms);
  EXPECT_GE(events->count(LockEventKind::WAITING), 1U);
  const LockMetrics metrics = m->metrics();
  EXPECT_EQ(metrics.waits, 1U);
  EXPECT_EQ(metrics.timeouts, 0U);
  EXPECT_EQ(metrics.acquisitions, 1U);
  EXPECT_EQ(metrics.waitLatency.count, 1U);
  m->releaseLock(wanted);
}

TEST_P(Events, ADeadlockIsReportedWithItsCycle) {
  auto events = std::make_shared<RecordedEvents>();
  auto m = observedManager(events);
  Lock child = m->getLockInstance("tree.leaf", LockLevel::DC);
  m->tryAcquireLock(child);
  Lock parent = m->getLockInstance("tree", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(parent, 30s, 5s); }),
            ErrorCode::DEADLOCK_DETECTED);
  const auto deadlocks = events->of(LockEventKind::DEADLOCK);
  ASSERT_EQ(deadlocks.size(), 1U);
  EXPECT_EQ(deadlocks[0].lockId, parent.lockId());
  ASSERT_FALSE(deadlocks[0].cycle.empty());
  EXPECT_EQ(deadlocks[0].cycle.front(), parent.storeKey());
  EXPECT_EQ(m->metrics().deadlocks, 1U);
  m->releaseLock(child);
}

TEST_P(Events, KeepAliveReportsRenewalsAndTheLossOfALease) {
  auto events = std::make_shared<RecordedEvents>();
  auto m = observedManager(events);
  Lock lock = m->getLockInstance("kept", LockLevel::DC);
  // A TTL whose renewals (every third of it) a busy machine still makes in
  // time; two of them, however long that takes.
  m->tryAcquireLock(lock, 1500ms);
  const std::string key = lock.storeKey();
  const std::int64_t fencing = lock.fencingToken();
  LockGuard guard(*m, std::move(lock));
  ASSERT_TRUE(eventually(
      [&] { return events->count(LockEventKind::LEASE_RENEWED) >= 2; }, 30s));
  // Taken away by an operator: the next renewal finds it gone.
  ASSERT_TRUE(adminOf(m->store()).forceRelease(key));
  ASSERT_TRUE(eventually(
      [&] { return events->count(LockEventKind::LEASE_LOST) == 1; }, 30s));
  EXPECT_TRUE(guard.lost());
  const LockEvent lost = events->of(LockEventKind::LEASE_LOST).front();
  EXPECT_EQ(lost.fencingToken, fencing);
  EXPECT_EQ(lost.key, key);
  EXPECT_GE(lost.heldFor, 400ms);
  const LockMetrics metrics = m->metrics();
  EXPECT_GE(metrics.renewals, 2U);
  EXPECT_EQ(metrics.lostLeases, 1U);
}

// Every event of a contended acquire, a wait, a deadlock and a release
// reaches a handler that throws each time; no call notices.
TEST_P(Events, AHandlerThatThrowsNeverBreaksACall) {
  class Throwing final : public LockEventHandler {
   public:
    void onEvent(const LockEvent&) override {
      ++calls;
      throw std::runtime_error("handler failed");
    }
    std::atomic<int> calls{0};
  };
  auto throwing = std::make_shared<Throwing>();
  auto holder = manager();
  Lock held = holder->getLockInstance("t", LockLevel::DC);
  asOwner("the-holder", [&] { holder->tryAcquireLock(held); });
  auto m = observedManager(throwing);
  Lock wanted = m->getLockInstance("t", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(wanted, 30s, 100ms); }),
            ErrorCode::LOCK_UNAVAILABLE);
  holder->releaseLock(held);
  m->acquireLock(wanted, 30s, 1s);
  EXPECT_TRUE(wanted.isAcquired());
  Lock child = m->getLockInstance("t.c", LockLevel::DC);
  Lock other = m->getLockInstance("t", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(other, 30s, 1s); }),
            ErrorCode::DEADLOCK_DETECTED);
  EXPECT_TRUE(m->releaseLock(wanted));
  m->tryAcquireLock(child);
  EXPECT_TRUE(m->releaseLock(child));
  // WAITING, ACQUIRED, DEADLOCK, RELEASED, ACQUIRED, RELEASED at least.
  EXPECT_GE(throwing->calls.load(), 6);
  EXPECT_EQ(m->metrics().acquisitions, 2U);
}

INSTANTIATE_TEST_SUITE_P(Stores, Events,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
