// Owners, request rows, deadlock detection and wake-up on release.
#include <atomic>
#include <string>
#include <thread>

#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/eventually.h"
#include "support/joining_thread.h"
#include "support/owners.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
class Waiting : public StoreConformance {
 protected:
  void expectReleaseWakesWaiter(const std::string& heldId,
                                const std::string& wantedId);
};

TEST_P(Waiting, HolderDetailsAreReadableForAHeldLock) {
  auto m = manager();
  auto observer = manager();
  Lock lock = m->getLockInstance("report", LockLevel::DC);
  EXPECT_FALSE(m->describeLock(lock).has_value());
  asOwner("billing-job-7", [&] { m->tryAcquireLock(lock); });
  EXPECT_EQ(lock.owner(), "billing-job-7");
  Lock same = observer->getLockInstance("report", LockLevel::DC);
  // Same client id, so the same key: anyone can read who holds it.
  auto row = observer->describeLock(same);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->owner, observer->listedOwner("billing-job-7"));
  EXPECT_EQ(row->holder.pid, static_cast<std::int64_t>(getpid()));
  EXPECT_FALSE(row->holder.host.empty());
  EXPECT_EQ(row->fencingToken, lock.fencingToken());
  ASSERT_TRUE(m->releaseLock(lock));
  EXPECT_FALSE(observer->describeLock(same).has_value());
}

TEST_P(Waiting, EveryThreadHasItsOwnOwnerUnlessAScopeSetsOne) {
  auto m = manager();
  Lock mine = m->getLockInstance("mine", LockLevel::DC);
  m->tryAcquireLock(mine);
  EXPECT_EQ(mine.owner(), currentOwner());
  std::string otherOwner;
  std::thread([&] {
    Lock theirs = m->getLockInstance("theirs", LockLevel::DC);
    m->tryAcquireLock(theirs);
    otherOwner = theirs.owner();
  }).join();
  EXPECT_NE(otherOwner, mine.owner());
  EXPECT_EQ(otherOwner.size(), 36U);  // a GUID
  {
    OwnerScope outer("outer");
    {
      OwnerScope inner("inner");
      EXPECT_EQ(currentOwner(), "inner");
    }
    EXPECT_EQ(currentOwner(), "outer");
  }
  EXPECT_EQ(currentOwner(), mine.owner());
  EXPECT_EQ(codeOf([] { OwnerScope bad(""); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] { OwnerScope bad(std::string(129, 'o')); }),
            ErrorCode::INVALID_ARGUMENT);
}

TEST_P(Waiting, TwoThreadsWaitingForEachOthersLockOneGetsDeadlockDetected) {
  LockConfiguration config = fastConfig();
  config.waitForLock = std::chrono::seconds(20);
  auto m1 = manager("", "farm1", config);
  auto m2 = manager("", "farm1", config);
  struct Outcome {
    ErrorCode code = ErrorCode::INTERNAL_ERROR;
    bool acquired = false;
    milliseconds took{0};
  };
  Outcome out[2];
  std::atomic<int> ready{0};
  auto side = [&](DistributedLockManager& m, const char* mine,
                  const char* theirs, Outcome& o) {
    Lock held = m.getLockInstance(mine, LockLevel::DC);
    m.tryAcquireLock(held);
    ++ready;
    while (ready.load() < 2) std::this_thread::yield();
    Lock wanted = m.getLockInstance(theirs, LockLevel::DC);
    const auto start = steady_clock::now();
    try {
      m.acquireLock(wanted);
      o.acquired = true;
      m.releaseLock(wanted);
    } catch (const DLMException& e) {
      o.code = e.code();
    }
    o.took =
        std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
    m.releaseLock(held);  // lets the other side through
  };
  JoiningThread a(side, std::ref(*m1), "left", "right", std::ref(out[0]));
  JoiningThread b(side, std::ref(*m2), "right", "left", std::ref(out[1]));
  a.join();
  b.join();
  const int deadlocks = (out[0].code == ErrorCode::DEADLOCK_DETECTED) +
                        (out[1].code == ErrorCode::DEADLOCK_DETECTED);
  ASSERT_EQ(deadlocks, 1) << "exactly one side is told";
  const Outcome& loser =
      out[0].code == ErrorCode::DEADLOCK_DETECTED ? out[0] : out[1];
  const Outcome& winner =
      out[0].code == ErrorCode::DEADLOCK_DETECTED ? out[1] : out[0];
  EXPECT_LT(loser.took, milliseconds(1000));
  EXPECT_FALSE(loser.acquired);
  EXPECT_TRUE(winner.acquired);
  EXPECT_LT(winner.took, milliseconds(10000)) << "not after its 20 s timeout";
}

TEST_P(Waiting, WaitingForALockHeldUnderTheSameOwnerIsADeadlock) {
  auto m = manager();
  auto other = manager();
  Lock child = m->getLockInstance("tree.leaf", LockLevel::DC);
  m->tryAcquireLock(child);
  Lock parent = other->getLockInstance("tree", LockLevel::DC);
  const auto start = steady_clock::now();
  try {
    other->acquireLock(parent, milliseconds(1000), std::chrono::seconds(10));
    ADD_FAILURE() << "acquired a lock blocked by its own owner";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::DEADLOCK_DETECTED);
    EXPECT_NE(std::string(e.what()).find("tree"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_P(Waiting, AWaitThatEndedLeavesNoRequestBehind) {
  auto m = manager();
  Lock x = m->getLockInstance("x", LockLevel::DC);
  Lock y = m->getLockInstance("y", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(x); });
  asOwner("b", [&] {
    Lock wantX = m->getLockInstance("x", LockLevel::DC);
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wantX, milliseconds(1000), milliseconds(100));
              }),
              ErrorCode::LOCK_UNAVAILABLE);
    m->tryAcquireLock(y);
  });
  // Had b's request for x stayed, a waiting for y (held by b) would close
  // a cycle.
  asOwner("a", [&] {
    Lock wantY = m->getLockInstance("y", LockLevel::DC);
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wantY, milliseconds(1000), milliseconds(100));
              }),
              ErrorCode::LOCK_UNAVAILABLE);
  });
}

TEST_P(Waiting, ARequestOfACrashedWaiterIsIgnoredAfterItsDeadline) {
  auto m = manager();
  Lock x = m->getLockInstance("x", LockLevel::DC);
  Lock y = m->getLockInstance("y", LockLevel::DC);
  asOwner("a", [&] { m->tryAcquireLock(x); });
  asOwner("crashed", [&] { m->tryAcquireLock(y); });
  // "crashed" recorded that it waits for x, with a deadline of 1.5 s (long
  // enough to be live at the next call when other tests share the CPU), and
  // died.
  Lock probe = m->getLockInstance("x", LockLevel::DC);
  const WaitRegistration r = m->store().registerWait(WaitRequest{
      StoreKey{
          probe.storeKey(), {}, probe.storeKey() + ".", probe.storeKey() + "/"},
      "crashed", milliseconds(1500)});
  ASSERT_TRUE(r.deadlockCycle.empty());
  asOwner("a", [&] {
    Lock wantY = m->getLockInstance("y", LockLevel::DC);
    // Told before any sleep: a timeout that a slow first attempt cannot use
    // up (with 50 ms a busy machine ended the wait before it registered).
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wantY, milliseconds(1000), milliseconds(5000));
              }),
              ErrorCode::DEADLOCK_DETECTED)
        << "the live request closes the cycle";
  });
  std::this_thread::sleep_for(milliseconds(1700));
  asOwner("a", [&] {
    Lock wantY = m->getLockInstance("y", LockLevel::DC);
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wantY, milliseconds(1000), milliseconds(50));
              }),
              ErrorCode::LOCK_UNAVAILABLE)
        << "past its deadline the request no longer counts";
  });
}

// Right after a server restart an owner can hold a key it does not know of
// (an acquisition whose reply was lost) while its thread waits for a key that
// this hold blocks: a cycle of one, which ends that owner's wait at once. A
// second owner whose wait meets that request is not in a deadlock.
TEST_P(Waiting, AnotherOwnersCycleOfOneIsNoDeadlockForMe) {
  auto m = manager();
  Lock jobB = m->getLockInstance("job.b", LockLevel::DC);
  Lock jobA = m->getLockInstance("job.a", LockLevel::DC);
  Lock job = m->getLockInstance("job", LockLevel::DC);
  asOwner("b", [&] { m->tryAcquireLock(jobB); });
  // a waits for `job` (in b's way: its child job.b is held) ...
  const WaitRegistration r = m->store().registerWait(WaitRequest{
      StoreKey{job.storeKey(), {}, job.storeKey() + ".", job.storeKey() + "/"},
      "a", milliseconds(5000)});
  ASSERT_TRUE(r.deadlockCycle.empty());
  // ... and holds job.a, which its own request for `job` now waits for.
  asOwner("a", [&] { m->tryAcquireLock(jobA); });
  asOwner("b", [&] {
    Lock wantJobA = m->getLockInstance("job.a", LockLevel::DC);
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wantJobA, milliseconds(1000), milliseconds(100));
              }),
              ErrorCode::LOCK_UNAVAILABLE)
        << "b waits for a's hold of job.a; a's request for `job` waits for "
           "b's job.b but also for a's own job.a, so a's wait ends without "
           "b: no deadlock";
  });
}

// A holder takes `heldId`; a waiter whose retries are 30 s apart waits for
// `wantedId` (25 s timeout). Once the waiter's request row is listed (it is in
// its wait, listening), the holder releases: the waiter must then acquire
// before its deadline, which only a wake-up allows. Judged by order, not by
// milliseconds: a busy machine may make every step slow.
void Waiting::expectReleaseWakesWaiter(const std::string& heldId,
                                       const std::string& wantedId) {
  LockConfiguration slow = fastConfig();
  slow.sleepBetweenRetries = std::chrono::seconds(30);
  auto holder = manager();
  auto waiterManager = manager("", "farm1", slow);
  Lock held = holder->getLockInstance(heldId, LockLevel::DC);
  asOwner("holder", [&] { holder->tryAcquireLock(held); });
  Lock wanted = waiterManager->getLockInstance(wantedId, LockLevel::DC);
  const auto deadline = steady_clock::now() + std::chrono::seconds(25);
  std::string waitError;
  JoiningThread waiter([&] {
    try {
      waiterManager->acquireLock(wanted, milliseconds(5000),
                                 std::chrono::seconds(25));
    } catch (const DLMException& e) {
      waitError = e.what();
    }
  });
  LockStoreAdmin& admin = *waiterManager->store().admin();
  ASSERT_TRUE(eventually(
      [&] { return !admin.listWaiters(wanted.storeKey()).empty(); },
      std::chrono::seconds(20)))
      << "the waiter never recorded its request";
  ASSERT_TRUE(holder->releaseLock(held))
      << "the holder's release; the row now: "
      << (holder->describeLock(held) ? "held" : "free");
  waiter.join();
  EXPECT_TRUE(wanted.isAcquired()) << waitError;
  EXPECT_LT(steady_clock::now(), deadline)
      << "woken by the release, not by the attempt at its deadline";
}

TEST_P(Waiting, AReleaseWakesAWaiterLongBeforeItsNextPoll) {
  expectReleaseWakesWaiter("handoff", "handoff");
}

TEST_P(Waiting, ReleasingADescendantWakesAWaiterForItsAncestor) {
  expectReleaseWakesWaiter("jobs.nightly.part1", "jobs");
}

INSTANTIATE_TEST_SUITE_P(Stores, Waiting, ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
