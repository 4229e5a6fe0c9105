// A wait whose request row could not be deleted when it ended (the store
// failed, as in a failover) leaves that row until the waiter's deadline
// + 1 s. The same owner's next wait must not take it for a deadlock: the
// row holds back a newer waiter, whose holder the owner then waits for.
// The manager deletes it in the background meanwhile.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "dlm/dlm.h"
#include "dlm/lock_store_wrapper.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/fake_store.h"
#include "support/owners.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// unregisterWait fails while `failing` is set, as a store mid-failover does.
class FailingUnregister final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  void unregisterWait(std::string_view key, std::string_view owner) override {
    if (failing) {
      throw DLMException(ErrorCode::CONNECTION_ERROR, "store unreachable",
                         true);
    }
    LockStoreWrapper::unregisterWait(key, owner);
  }
  std::atomic<bool> failing{false};
};

bool hasRequest(FakeStore& store, const std::string& owner,
                const std::string& key) {
  const auto rows = store.requests();
  return std::any_of(rows.begin(), rows.end(), [&](const auto& row) {
    return row.first == owner && row.second.find(key) != std::string::npos;
  });
}

TEST(StaleRequestRow, OfTheCallersOwnIsNoDeadlockAndIsDeleted) {
  auto fake = std::make_shared<FakeStore>();
  auto store = std::make_shared<FailingUnregister>(fake);
  LockConfiguration config;
  config.storeRetries = 0;
  config.sleepBetweenRetries = 20ms;
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(store)
               .configuration(config)
               .build();
  m->initialize();

  Lock pa = m->getLockInstance("a", LockLevel::DC);
  asOwner("P", [&] { m->tryAcquireLock(pa); });
  // O waits for "a" and gives up; its request row cannot be deleted.
  store->failing = true;
  Lock oa = m->getLockInstance("a", LockLevel::DC);
  asOwner("O", [&] {
    EXPECT_EQ(codeOf([&] { m->acquireLock(oa, 30s, 100ms); }),
              ErrorCode::LOCK_UNAVAILABLE);
  });
  store->failing = false;
  ASSERT_TRUE(hasRequest(*fake, "O", "#a")) << "the row did not stay";

  // R holds "b" and queues for "a" behind O's stale row.
  Lock rb = m->getLockInstance("b", LockLevel::DC);
  asOwner("R", [&] { m->tryAcquireLock(rb); });
  auto rWaits = std::async(std::launch::async, [&] {
    return asOwner("R", [&] {
      Lock ra = m->getLockInstance("a", LockLevel::DC);
      return codeOf([&] { m->acquireLock(ra, 30s, 2s); });
    });
  });
  ASSERT_TRUE(eventually([&] { return hasRequest(*fake, "R", "#a"); }));

  // O now waits for "b": R holds it and R waits behind O's stale row. Not a
  // deadlock: the row is deleted and O simply waits (and times out).
  Lock ob = m->getLockInstance("b", LockLevel::DC);
  asOwner("O", [&] {
    const DLMException e = errorOf([&] { m->acquireLock(ob, 30s, 200ms); });
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
  });
  EXPECT_FALSE(hasRequest(*fake, "O", "#a")) << "the stale row is still there";
  EXPECT_EQ(rWaits.get(), ErrorCode::LOCK_UNAVAILABLE);
}

// Once the store answers again, the row goes without any further wait of
// its owner.
TEST(StaleRequestRow, IsDeletedInTheBackground) {
  auto fake = std::make_shared<FakeStore>();
  auto store = std::make_shared<FailingUnregister>(fake);
  LockConfiguration config;
  config.storeRetries = 0;
  config.sleepBetweenRetries = 20ms;
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(store)
               .configuration(config)
               .build();
  m->initialize();

  Lock pa = m->getLockInstance("a", LockLevel::DC);
  asOwner("P", [&] { m->tryAcquireLock(pa); });
  store->failing = true;
  Lock oa = m->getLockInstance("a", LockLevel::DC);
  asOwner("O", [&] {
    EXPECT_EQ(codeOf([&] { m->acquireLock(oa, 30s, 100ms); }),
              ErrorCode::LOCK_UNAVAILABLE);
  });
  ASSERT_TRUE(hasRequest(*fake, "O", "#a")) << "the row did not stay";
  store->failing = false;
  // The fake's clock stands still: the row does not expire meanwhile.
  EXPECT_TRUE(eventually([&] { return !hasRequest(*fake, "O", "#a"); }))
      << "the stale row is still there";
}

}  // namespace
}  // namespace dlm::test
