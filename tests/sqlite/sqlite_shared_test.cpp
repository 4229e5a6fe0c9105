// SHARED holds on the SQLite store: takeovers between the modes, fencing
// tokens across them, purging of stale SHARED holds, the queue order of
// request rows, and two processes sharing one key on one file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/error.h"
#include "common/random_id.h"
#include "sqlite_child_process.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kScope = "DC#farm#client#";

class SqliteSharedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("shared.sqlite");
    store_ = openStore(path_);
  }

  // One attempt in `mode` with a fresh token, returned through `token`.
  AcquireResult take(const std::string& id, LockMode mode, milliseconds ttl,
                     std::string* token = nullptr,
                     const std::string& owner = "owner-1") {
    const StoreKey key = pathKey(kScope, id);
    const std::string fresh = internal::randomGuid();
    if (token != nullptr) *token = fresh;
    return store_->tryAcquire(
        AcquireRequest{key, owner, fresh, ttl, holder_, mode});
  }

  // Long enough that a lease taken just before is still live when the next
  // call checks it, even with other tests sharing the CPU.
  static constexpr milliseconds kShortLease{150};
  static void letLeasesEnd() {
    std::this_thread::sleep_for(kShortLease + milliseconds(30));
  }  // lets them run out

  static std::string key(const std::string& id) { return kScope + id; }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<SqliteStore> store_;
  const Holder holder_{"test-host", static_cast<std::int64_t>(getpid())};
};

TEST_F(SqliteSharedTest, ASharedAcquirerTakesOverAnExpiredExclusiveHolder) {
  std::string old;
  const AcquireResult first =
      take("k", LockMode::EXCLUSIVE, kShortLease, &old, "A");
  ASSERT_TRUE(first.acquired);
  // Live, it blocks a SHARED attempt.
  const AcquireResult early =
      take("k", LockMode::SHARED, seconds(30), nullptr, "B");
  EXPECT_FALSE(early.acquired);
  EXPECT_EQ(early.blockedBy, key("k"));
  letLeasesEnd();

  std::string reader;
  const AcquireResult shared =
      take("k", LockMode::SHARED, seconds(30), &reader, "B");
  ASSERT_TRUE(shared.acquired) << shared.blockedBy;
  EXPECT_GT(shared.fencingToken, first.fencingToken);
  // The expired holder lost it: its extension and release fail.
  EXPECT_FALSE(store_->extend(key("k"), old, seconds(30), LockMode::EXCLUSIVE)
                   .has_value());
  EXPECT_FALSE(store_->release(pathKey(kScope, "k"), old, LockMode::EXCLUSIVE));
  const auto holders = store_->holdersOf(key("k"));
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, LockMode::SHARED);
  EXPECT_EQ(holders[0].owner, "B");
  EXPECT_TRUE(holders[0].held);
  EXPECT_EQ(holders[0].fencingToken, shared.fencingToken);
  // The reader still holds it: extend works, by its own token.
  EXPECT_TRUE(store_->extend(key("k"), reader, seconds(30), LockMode::SHARED)
                  .has_value());
}

TEST_F(SqliteSharedTest, AnExclusiveAcquirerTakesOverExpiredSharedHolders) {
  std::string r1;
  std::string r2;
  ASSERT_TRUE(take("k", LockMode::SHARED, kShortLease, &r1, "A").acquired);
  ASSERT_TRUE(take("k", LockMode::SHARED, kShortLease, &r2, "B").acquired);
  EXPECT_EQ(store_->holdersOf(key("k")).size(), 2U);
  // Live SHARED holds of the key and of a descendant block EXCLUSIVE.
  EXPECT_FALSE(
      take("k", LockMode::EXCLUSIVE, seconds(30), nullptr, "C").acquired);
  letLeasesEnd();

  std::string writer;
  const AcquireResult exclusive =
      take("k", LockMode::EXCLUSIVE, seconds(30), &writer, "C");
  ASSERT_TRUE(exclusive.acquired) << exclusive.blockedBy;
  // Both readers lost it: their extensions report nullopt, releases false.
  for (const auto& token : {r1, r2}) {
    EXPECT_FALSE(store_->extend(key("k"), token, seconds(30), LockMode::SHARED)
                     .has_value());
    EXPECT_FALSE(
        store_->release(pathKey(kScope, "k"), token, LockMode::SHARED));
  }
  const auto holders = store_->holdersOf(key("k"));
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_EQ(holders[0].mode, LockMode::EXCLUSIVE);
  EXPECT_EQ(holders[0].owner, "C");
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_shared_holds"), "0");
}

TEST_F(SqliteSharedTest, SharedHoldsCoexistAndConflictAlongThePath) {
  ASSERT_TRUE(
      take("a.b", LockMode::SHARED, seconds(30), nullptr, "A").acquired);
  ASSERT_TRUE(
      take("a.b", LockMode::SHARED, seconds(30), nullptr, "B").acquired);
  // SHARED on an ancestor and a descendant: granted.
  EXPECT_TRUE(take("a", LockMode::SHARED, seconds(30), nullptr, "C").acquired);
  EXPECT_TRUE(
      take("a.b.c", LockMode::SHARED, seconds(30), nullptr, "D").acquired);
  // EXCLUSIVE anywhere on the path: refused, naming the first blocker (the
  // key itself, then ancestors root first, then descendants).
  const AcquireResult onKey = take("a.b", LockMode::EXCLUSIVE, seconds(30));
  EXPECT_FALSE(onKey.acquired);
  EXPECT_EQ(onKey.blockedBy, key("a.b"));
  const AcquireResult below = take("a.b.c.d", LockMode::EXCLUSIVE, seconds(30));
  EXPECT_FALSE(below.acquired);
  EXPECT_EQ(below.blockedBy, key("a"));
  // A sibling is free.
  EXPECT_TRUE(take("a.x", LockMode::SHARED, seconds(30)).acquired);
  const auto listed = store_->listHeld(kScope);
  std::vector<std::string> keys;
  for (const auto& r : listed) keys.push_back(r.key);
  EXPECT_EQ(keys, (std::vector<std::string>{key("a"), key("a.b"), key("a.b"),
                                            key("a.b.c"), key("a.x")}));
}

TEST_F(SqliteSharedTest, FirstBlockerIsInKeyOrderAcrossBothKindsOfHold) {
  // Descendants held both ways: the EXCLUSIVE one ("p.b") lives in another
  // table than the SHARED one ("p.a"), yet the first in key order is named.
  ASSERT_TRUE(take("p.b", LockMode::EXCLUSIVE, seconds(30)).acquired);
  ASSERT_TRUE(take("p.a", LockMode::SHARED, seconds(30)).acquired);
  const AcquireResult root = take("p", LockMode::EXCLUSIVE, seconds(30));
  EXPECT_FALSE(root.acquired);
  EXPECT_EQ(root.blockedBy, key("p.a"));
}

TEST_F(SqliteSharedTest, FencingTokensGrowAcrossModes) {
  std::int64_t last = 0;
  auto expectNext = [&](const AcquireResult& r) {
    ASSERT_TRUE(r.acquired) << r.blockedBy;
    EXPECT_GT(r.fencingToken, last);
    last = r.fencingToken;
  };
  const StoreKey k = pathKey(kScope, "f");
  std::string s1;
  std::string s2;
  expectNext(take("f", LockMode::SHARED, seconds(30), &s1, "A"));
  expectNext(take("f", LockMode::SHARED, seconds(30), &s2, "B"));
  EXPECT_TRUE(store_->release(k, s1, LockMode::SHARED));
  EXPECT_FALSE(store_->release(k, s1, LockMode::SHARED));  // already gone
  EXPECT_TRUE(store_->release(k, s2, LockMode::SHARED));
  std::string e1;
  expectNext(take("f", LockMode::EXCLUSIVE, seconds(30), &e1, "C"));
  EXPECT_TRUE(store_->release(k, e1, LockMode::EXCLUSIVE));
  std::string s3;
  expectNext(take("f", LockMode::SHARED, seconds(30), &s3, "A"));
  // A retry with the same token reports the same acquisition.
  const AcquireResult retried = store_->tryAcquire(
      AcquireRequest{k, "A", s3, seconds(30), holder_, LockMode::SHARED});
  EXPECT_TRUE(retried.acquired);
  EXPECT_EQ(retried.fencingToken, last);
  EXPECT_TRUE(store_->release(k, s3, LockMode::SHARED));
  expectNext(take("f", LockMode::EXCLUSIVE, kShortLease, nullptr, "B"));
  letLeasesEnd();
  expectNext(take("f", LockMode::SHARED, seconds(30), nullptr, "A"));
}

TEST_F(SqliteSharedTest, PurgeDeletesStaleSharedHoldsAndKeepsKeysWithLiveOnes) {
  // "gone": only a stale hold. "kept": a stale hold and a live one.
  ASSERT_TRUE(take("gone", LockMode::SHARED, milliseconds(1)).acquired);
  ASSERT_TRUE(
      take("kept", LockMode::SHARED, milliseconds(1), nullptr, "A").acquired);
  std::string live;
  const AcquireResult kept =
      take("kept", LockMode::SHARED, seconds(60), &live, "B");
  ASSERT_TRUE(kept.acquired);
  letLeasesEnd();

  const PurgeBatch dry = store_->purgeIdle(milliseconds(0), 100, true);
  EXPECT_EQ(dry.rows, 3);  // two stale holds and the key row of "gone"
  const PurgeBatch batch = store_->purgeIdle(milliseconds(0), 100, false);
  EXPECT_EQ(batch.rows, 3);
  RawDb raw(path_);
  EXPECT_EQ(raw.rows("SELECT resource, owner_id FROM dlm_shared_holds"),
            std::vector<std::string>{key("kept") + "|B"});
  EXPECT_EQ(raw.rows("SELECT resource FROM dlm_locks ORDER BY resource"),
            std::vector<std::string>{key("kept")});
  EXPECT_TRUE(store_->extend(key("kept"), live, seconds(60), LockMode::SHARED)
                  .has_value());
  // The purged key comes back above every token it issued.
  const AcquireResult back = take("gone", LockMode::SHARED, seconds(30));
  ASSERT_TRUE(back.acquired);
  EXPECT_GT(back.fencingToken, 1);
  EXPECT_GE(batch.fencingFloor, 1);
}

TEST_F(SqliteSharedTest, AStalePurgeBoundKeepsHoldsThatAreNotIdleLongEnough) {
  ASSERT_TRUE(take("k", LockMode::SHARED, milliseconds(1)).acquired);
  letLeasesEnd();
  EXPECT_EQ(store_->purgeIdle(std::chrono::hours(1), 100, false).rows, 0);
  EXPECT_EQ(store_->holdersOf(key("k")).size(), 1U);
  EXPECT_FALSE(store_->holdersOf(key("k"))[0].held);
}

TEST_F(SqliteSharedTest, AnOlderWaitingWriterHoldsBackNewReaders) {
  ASSERT_TRUE(take("q", LockMode::SHARED, seconds(30), nullptr, "R1").acquired);
  const StoreKey q = pathKey(kScope, "q");
  // A writer waits for the reader.
  ASSERT_TRUE(
      store_
          ->registerWait(WaitRequest{q, "W", seconds(30), LockMode::EXCLUSIVE})
          .deadlockCycle.empty());
  const auto waiters = store_->listWaiters(kScope);
  ASSERT_EQ(waiters.size(), 1U);
  EXPECT_EQ(waiters[0].mode, LockMode::EXCLUSIVE);
  // A new reader, of the key or of a descendant, is queued behind it.
  for (const std::string id : {"q", "q.child"}) {
    const AcquireResult r =
        take(id, LockMode::SHARED, seconds(30), nullptr, "R2");
    EXPECT_FALSE(r.acquired) << id;
    EXPECT_TRUE(r.queued) << id;
    EXPECT_EQ(r.blockedBy, key("q")) << id;
  }
  // A waiting reader holds back no reader.
  store_->unregisterWait(key("q"), "W");
  ASSERT_TRUE(
      store_->registerWait(WaitRequest{q, "W", seconds(30), LockMode::SHARED})
          .deadlockCycle.empty());
  EXPECT_TRUE(take("q", LockMode::SHARED, seconds(30), nullptr, "R2").acquired);
}

TEST_F(SqliteSharedTest, UpgradingASharedHoldIsADeadlockOfOne) {
  ASSERT_TRUE(take("u", LockMode::SHARED, seconds(30), nullptr, "Z").acquired);
  const StoreKey u = pathKey(kScope, "u");
  EXPECT_EQ(
      store_->registerWait(WaitRequest{u, "Z", seconds(5), LockMode::EXCLUSIVE})
          .deadlockCycle,
      std::vector<std::string>{key("u")});
  // Another owner's EXCLUSIVE request waits for Z; Z asking SHARED for a
  // descendant queues behind that request (older, or recorded in the same
  // millisecond by an owner that sorts first), which waits for Z: a cycle.
  ASSERT_TRUE(
      store_->registerWait(WaitRequest{u, "B", seconds(5), LockMode::EXCLUSIVE})
          .deadlockCycle.empty());
  const StoreKey child = pathKey(kScope, "u.v");
  EXPECT_EQ(
      store_
          ->registerWait(WaitRequest{child, "Z", seconds(5), LockMode::SHARED})
          .deadlockCycle,
      (std::vector<std::string>{key("u.v"), key("u")}));
}

TEST_F(SqliteSharedTest, TwoProcessesHoldOneKeySharedAtOnce) {
  // The other process takes SHARED through the public API and keeps it.
  ChildProcess child(holderProgram(), {"hold-lock", path_, "shared-client",
                                       "reports.daily", "60000", "shared"});
  const auto line = child.readLine(seconds(20));
  ASSERT_TRUE(line.has_value()) << "the child did not report";
  ASSERT_EQ(line->rfind("ready ", 0), 0U) << *line;
  const std::int64_t childToken = std::stoll(line->substr(6));

  auto manager =
      DistributedLockManager::builder()
          .clientId("shared-client")
          .store(std::make_shared<SqliteStore>(SqliteStoreOptions{path_}))
          .build();
  manager->initialize();
  Lock reader = manager->getLockInstance("reports.daily", LockLevel::XDC,
                                         LockMode::SHARED);
  manager->tryAcquireLock(reader, seconds(30));
  EXPECT_GT(reader.fencingToken(), childToken);
  const auto holders = manager->describeHolders(reader);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].holder.pid, child.pid());
  EXPECT_EQ(holders[1].holder.pid, getpid());
  for (const auto& h : holders) EXPECT_EQ(h.mode, LockMode::SHARED);
  // A writer is refused while both read.
  Lock writer = manager->getLockInstance("reports.daily", LockLevel::XDC);
  try {
    manager->tryAcquireLock(writer, seconds(30));
    FAIL() << "an EXCLUSIVE lock was granted over two SHARED holders";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
  }
  manager->releaseLock(reader);
  child.killAndWait(SIGKILL);
}

}  // namespace
}  // namespace dlm::sqlite_test
