// LockGuard (with keep-alive), withLock / tryWithLock and
// ClusteredLockService against the real stores.
#include <atomic>
#include <optional>
#include <thread>

#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/eventually.h"
#include "support/owners.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using Helpers = StoreConformance;

bool heldByAnyone(DistributedLockManager& m, const std::string& id) {
  return m.describeLock(m.getLockInstance(id, LockLevel::DC)).has_value();
}

TEST_P(Helpers, LockGuardReleasesWhenItGoesOutOfScope) {
  auto m = manager();
  {
    Lock lock = m->getLockInstance("scoped", LockLevel::DC);
    m->tryAcquireLock(lock);
    LockGuard guard(*m, std::move(lock), KeepAliveOptions{false, {}});
    EXPECT_TRUE(guard.holdsLock());
    EXPECT_TRUE(heldByAnyone(*m, "scoped"));
    LockGuard moved = std::move(guard);
    EXPECT_FALSE(guard.holdsLock());  // NOLINT(bugprone-use-after-move)
    EXPECT_TRUE(moved.holdsLock());
  }
  EXPECT_FALSE(heldByAnyone(*m, "scoped"));
  Lock unheld = m->getLockInstance("unheld", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { LockGuard g(*m, std::move(unheld)); }),
            ErrorCode::LOCK_NOT_HELD);
}

TEST_P(Helpers, KeepAliveHoldsTheLockPastItsTtlWhileTheGuardLives) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("renewed", LockLevel::DC);
  // Renewed every third of the TTL: a busy machine still renews in time.
  m->tryAcquireLock(lock, milliseconds(1200));
  const StoreTime firstExpiry = lock.expiresAt();
  {
    LockGuard guard(*m, std::move(lock));
    std::this_thread::sleep_for(milliseconds(3000));  // 2.5 TTLs
    EXPECT_TRUE(guard.holdsLock());
    EXPECT_GT(guard.expiresAt(), firstExpiry);
    Lock attempt = rival->getLockInstance("renewed", LockLevel::DC);
    EXPECT_EQ(codeOf([&] { rival->tryAcquireLock(attempt); }),
              ErrorCode::LOCK_UNAVAILABLE);
  }
  EXPECT_FALSE(heldByAnyone(*m, "renewed"));
}

TEST_P(Helpers, KeepAliveTellsTheHolderTheMomentTheLockIsLost) {
  auto m = manager();
  auto rival = manager();
  Lock lock = m->getLockInstance("stolen", LockLevel::DC);
  m->tryAcquireLock(lock, milliseconds(600));
  std::atomic<bool> lostFlag{false};
  std::atomic<int> lostCode{-1};
  LockGuard guard(*m, std::move(lock),
                  KeepAliveOptions{true, [&](const DLMException& why) {
                                     lostCode = static_cast<int>(why.code());
                                     lostFlag = true;
                                   }});
  // An operator frees it and someone else takes it.
  ASSERT_TRUE(adminOf(m->store()).forceRelease(guard.lock().storeKey()));
  Lock taker = rival->getLockInstance("stolen", LockLevel::DC);
  rival->tryAcquireLock(taker);
  ASSERT_TRUE(
      eventually([&] { return lostFlag.load(); }, std::chrono::seconds(5)))
      << "no callback within 5 s (renewal every 200 ms)";
  EXPECT_EQ(lostCode.load(), static_cast<int>(ErrorCode::LOCK_NOT_HELD));
  EXPECT_TRUE(guard.lost());
  EXPECT_FALSE(guard.holdsLock());
  EXPECT_FALSE(guard.release()) << "the new holder's lock is left alone";
  EXPECT_TRUE(rival->describeLock(taker).has_value());
}

TEST_P(Helpers, WithLockRunsTheBodyUnderTheLockAndReleasesOnEveryExit) {
  auto m = manager();
  const int result = m->withLock("nightly", LockLevel::DC, [&] {
    EXPECT_TRUE(heldByAnyone(*m, "nightly"));
    return 42;
  });
  EXPECT_EQ(result, 42);
  EXPECT_FALSE(heldByAnyone(*m, "nightly"));
  std::int64_t token = 0;
  m->withLock("nightly", LockLevel::DC,
              [&](const Lock& lock) { token = lock.fencingToken(); });
  EXPECT_EQ(token, 2);
  EXPECT_THROW(m->withLock("nightly", LockLevel::DC,
                           [] { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_FALSE(heldByAnyone(*m, "nightly")) << "released after the throw";
}

TEST_P(Helpers, WithLockThrowsLockUnavailableAndTryWithLockSkipsTheBody) {
  LockConfiguration quick = fastConfig();
  quick.waitForLock = milliseconds(100);
  auto holder = manager();
  auto m = manager("", "farm1", quick);
  Lock held = holder->getLockInstance("busy", LockLevel::DC);
  asOwner("holder", [&] { holder->tryAcquireLock(held); });
  bool ran = false;
  EXPECT_EQ(
      codeOf([&] { m->withLock("busy", LockLevel::DC, [&] { ran = true; }); }),
      ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_FALSE(m->tryWithLock("busy", LockLevel::DC, [&] { ran = true; }));
  EXPECT_FALSE(ran);
  ASSERT_TRUE(holder->releaseLock(held));
  EXPECT_TRUE(m->tryWithLock("busy", LockLevel::DC, [&] { ran = true; }));
  EXPECT_TRUE(ran);
  EXPECT_FALSE(heldByAnyone(*m, "busy"));
}

TEST_P(Helpers, ClusteredLockServiceHoldsLocksPerOwner) {
  auto m = manager();
  ClusteredLockService service(*m);  // XDC locks
  EXPECT_TRUE(service.getLock("import", std::chrono::seconds(30)));
  EXPECT_TRUE(service.holdsLock("import"));
  EXPECT_TRUE(service.getLock("import", std::chrono::seconds(30)))
      << "the owner already holds it";
  bool otherGot = true;
  bool otherReleased = true;
  std::thread([&] {
    otherGot = service.getLock("import", std::chrono::seconds(30));
    otherReleased = service.releaseLock("import");
  }).join();
  EXPECT_FALSE(otherGot) << "another thread is another owner";
  EXPECT_FALSE(otherReleased) << "and cannot release this owner's lock";
  EXPECT_TRUE(service.releaseLock("import"));
  EXPECT_FALSE(service.releaseLock("import"));
  std::thread([&] {
    otherGot = service.getLock("import", std::chrono::seconds(30),
                               std::chrono::seconds(5));
    service.releaseLock("import");
  }).join();
  EXPECT_TRUE(otherGot);
}

TEST_P(Helpers, WithLockInSharedModeLetsReadersRunTogether) {
  auto m = manager();
  // Two SHARED bodies on one key run at the same time: each waits (at most
  // 5 s) until the other has started.
  std::atomic<int> inside{0};
  std::atomic<bool> sawEachOther[2] = {false, false};
  auto reader = [&](int i) {
    m->withLock(
        "report", LockLevel::DC, LockMode::SHARED, [&](const Lock& lock) {
          EXPECT_EQ(lock.lockMode(), LockMode::SHARED);
          ++inside;
          sawEachOther[i] = eventually([&] { return inside == 2; });
          // While both read, a writer's one attempt is refused and
          // its body skipped.
          if (i == 0) {
            bool ran = false;
            std::thread([&] {
              EXPECT_FALSE(m->tryWithLock("report", LockLevel::DC,
                                          LockMode::EXCLUSIVE,
                                          [&] { ran = true; }));
            }).join();
            EXPECT_FALSE(ran);
          }
          EXPECT_TRUE(
              eventually([&] { return sawEachOther[0] && sawEachOther[1]; }));
        });
  };
  std::thread a(reader, 0), b(reader, 1);
  a.join();
  b.join();
  EXPECT_TRUE(sawEachOther[0] && sawEachOther[1]);
  EXPECT_FALSE(heldByAnyone(*m, "report"));
  EXPECT_TRUE(
      m->tryWithLock("report", LockLevel::DC, LockMode::EXCLUSIVE, [] {}));
}

TEST_P(Helpers, ClusteredLockServiceTakesSharedLocksPerOwner) {
  auto m = manager();
  ClusteredLockService service(*m);  // XDC locks
  const auto ttl = std::chrono::seconds(30);
  EXPECT_TRUE(service.getLock("catalog", ttl, LockMode::SHARED));
  EXPECT_EQ(service.heldMode("catalog"), LockMode::SHARED);
  // No upgrade: asking EXCLUSIVE while holding SHARED is refused.
  EXPECT_EQ(codeOf([&] { service.getLock("catalog", ttl); }),
            ErrorCode::INVALID_ARGUMENT);
  bool otherShared = false, otherReleased = false;
  std::thread([&] {
    otherShared = service.getLock("catalog", ttl, LockMode::SHARED);
    otherReleased = service.releaseLock("catalog");
  }).join();
  EXPECT_TRUE(otherShared) << "readers of two owners share the resource";
  EXPECT_TRUE(otherReleased) << "its release frees its own hold only";
  EXPECT_TRUE(service.holdsLock("catalog"));
  // A third owner's writer is refused while this owner reads.
  bool writer = true;
  std::thread([&] { writer = service.getLock("catalog", ttl); }).join();
  EXPECT_FALSE(writer);
  EXPECT_TRUE(service.releaseLock("catalog"));
  // EXCLUSIVE covers a later SHARED request of the same owner.
  EXPECT_TRUE(service.getLock("catalog", ttl));
  EXPECT_TRUE(service.getLock("catalog", ttl, LockMode::SHARED));
  EXPECT_EQ(service.heldMode("catalog"), LockMode::EXCLUSIVE);
  EXPECT_TRUE(service.releaseLock("catalog"));
  EXPECT_EQ(service.heldMode("catalog"), std::nullopt);
}

TEST_P(Helpers, ClusteredLockServiceCommitsAndRollsBackWithTheApplication) {
  auto m = manager();
  ClusteredLockService service(*m, LockLevel::DC);
  ASSERT_TRUE(service.getLock("invoice", std::chrono::seconds(30)));
  {
    auto app = env().beginAppTransaction();
    service.commitLock("invoice", app->adapter());
    app->rollback();
  }
  EXPECT_TRUE(heldByAnyone(*m, "invoice")) << "the app rolled back";
  EXPECT_TRUE(service.rollbackLock("invoice"));
  EXPECT_FALSE(heldByAnyone(*m, "invoice"));
  ASSERT_TRUE(service.getLock("invoice", std::chrono::seconds(30)));
  auto app = env().beginAppTransaction();
  service.commitLock("invoice", app->adapter());
  app->commit();
  EXPECT_FALSE(heldByAnyone(*m, "invoice"));
  EXPECT_EQ(codeOf([&] {
              auto again = env().beginAppTransaction();
              service.commitLock("never", again->adapter());
            }),
            ErrorCode::LOCK_NOT_HELD);
}

INSTANTIATE_TEST_SUITE_P(Stores, Helpers,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
