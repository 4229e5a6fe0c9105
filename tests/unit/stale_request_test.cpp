// A wait whose request row could not be deleted when it ended (the store
// failed, as in a failover) leaves that row until the waiter's deadline
// + 1 s. The same owner's next wait must not take it for a deadlock: the
// row holds back a newer waiter, whose holder the owner then waits for.
// The manager deletes it in the background meanwhile, as it deletes the
// row of a wait that ended with the grant (acquireLock returns first).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

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

// unregisterWait does not reach the store while held (a store slow to
// answer), then forwards; counts the calls that entered and returned.
class HeldUnregister final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  void unregisterWait(std::string_view key, std::string_view owner) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++entered_;
      letGo_.wait(lock, [this] { return !held_; });
    }
    LockStoreWrapper::unregisterWait(key, owner);
    const std::lock_guard<std::mutex> lock(mutex_);
    returned_.emplace_back(owner, key);
  }
  void hold() {
    const std::lock_guard<std::mutex> lock(mutex_);
    held_ = true;
  }
  void letGo() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      held_ = false;
    }
    letGo_.notify_all();
  }
  int entered() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return entered_;
  }
  // (owner, key) of the calls that returned, in order.
  std::vector<std::pair<std::string, std::string>> returned() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return returned_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable letGo_;
  bool held_ = false;
  int entered_ = 0;
  std::vector<std::pair<std::string, std::string>> returned_;
};

// Lets the held calls go when a test ends, however it ends: declared after
// the futures of the threads that may wait for them.
class LetGoAtEnd {
 public:
  explicit LetGoAtEnd(HeldUnregister& store) : store_(store) {}
  ~LetGoAtEnd() { store_.letGo(); }
  LetGoAtEnd(const LetGoAtEnd&) = delete;
  LetGoAtEnd& operator=(const LetGoAtEnd&) = delete;

 private:
  HeldUnregister& store_;
};

std::unique_ptr<DistributedLockManager> quickManager(
    std::shared_ptr<LockStore> store) {
  LockConfiguration config;
  config.sleepBetweenRetries = 50ms;
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(std::move(store))
               .configuration(config)
               .build();
  m->initialize();
  return m;
}

// `lock`'s acquireLock as `owner` on a thread of its own.
std::future<void> acquireAs(const std::string& owner, DistributedLockManager& m,
                            Lock& lock) {
  return std::async(std::launch::async, [owner, &m, &lock] {
    asOwner(owner, [&] { m.acquireLock(lock, 30s, 10s); });
  });
}

bool isReady(const std::future<void>& f, std::chrono::milliseconds within) {
  return f.wait_for(within) == std::future_status::ready;
}

TEST(GrantedWait, ReturnsBeforeItsRequestRowIsDeleted) {
  auto fake = std::make_shared<FakeStore>();
  auto store = std::make_shared<HeldUnregister>(fake);
  auto m = quickManager(store);
  Lock pa = m->getLockInstance("a", LockLevel::DC);
  asOwner("P", [&] { m->tryAcquireLock(pa); });
  store->hold();

  Lock oa = m->getLockInstance("a", LockLevel::DC);
  std::future<void> waited = acquireAs("O", *m, oa);
  const LetGoAtEnd letGo(*store);
  ASSERT_TRUE(eventually([&] { return hasRequest(*fake, "O", "#a"); }));
  asOwner("P", [&] { m->releaseLock(pa); });
  ASSERT_TRUE(isReady(waited, 5s)) << "acquireLock waits for unregisterWait";
  EXPECT_NO_THROW(waited.get());
  EXPECT_TRUE(oa.isAcquired());
  EXPECT_TRUE(store->returned().empty())
      << "acquireLock returned after unregisterWait";

  // The row is deleted in the background once the store answers.
  EXPECT_TRUE(eventually([&] { return store->entered() == 1; }));
  store->letGo();
  const std::vector<std::pair<std::string, std::string>> deleted{
      {"O", oa.storeKey()}};
  EXPECT_TRUE(eventually([&] { return store->returned() == deleted; }));
  EXPECT_FALSE(hasRequest(*fake, "O", "#a"));
}

// The same owner waits for the key again while the deletion of its first
// request row is still on its way to the store: the new row stays.
TEST(GrantedWait, ItsRowsDeletionLeavesTheOwnersNextRequestForTheKey) {
  auto fake = std::make_shared<FakeStore>();
  auto store = std::make_shared<HeldUnregister>(fake);
  auto m = quickManager(store);
  Lock pa = m->getLockInstance("a", LockLevel::DC);
  asOwner("P", [&] { m->tryAcquireLock(pa); });
  store->hold();

  Lock oa = m->getLockInstance("a", LockLevel::DC);
  Lock again = m->getLockInstance("a", LockLevel::DC);
  std::future<void> first = acquireAs("O", *m, oa);
  std::future<void> second;
  const LetGoAtEnd letGo(*store);
  ASSERT_TRUE(eventually([&] { return hasRequest(*fake, "O", "#a"); }));
  asOwner("P", [&] { m->releaseLock(pa); });
  ASSERT_TRUE(isReady(first, 5s));
  first.get();
  // The first request's deletion is in the store, held there.
  ASSERT_TRUE(eventually([&] { return store->entered() == 1; }));

  asOwner("O", [&] { m->releaseLock(oa); });
  ASSERT_NO_THROW(asOwner("P", [&] { m->tryAcquireLock(pa); }));
  const std::size_t registered = fake->registeredWaits().size();
  second = acquireAs("O", *m, again);
  const auto registeredAgain = [&] {
    return fake->registeredWaits().size() > registered;
  };
  // Time for a registration that did not wait to happen before the
  // deletion returns (a settled one waits for it).
  eventually(registeredAgain, 300ms);
  store->letGo();
  ASSERT_TRUE(eventually(
      [&] { return !store->returned().empty() && registeredAgain(); }));
  EXPECT_FALSE(isReady(second, 0ms)) << "the second wait ended";
  EXPECT_TRUE(hasRequest(*fake, "O", "#a"))
      << "the first request's deletion took the second request";

  asOwner("P", [&] { m->releaseLock(pa); });
  ASSERT_TRUE(isReady(second, 5s));
  EXPECT_NO_THROW(second.get());
  EXPECT_TRUE(again.isAcquired());
}

}  // namespace
}  // namespace dlm::test
