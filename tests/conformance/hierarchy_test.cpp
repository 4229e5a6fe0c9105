// The hierarchy rules of docs/design.md: a held "a.b" blocks "a", "a.b" and
// "a.b.*", never "a.c" (or a look-alike such as "a.bc").
#include <atomic>
#include <mutex>
#include <thread>

#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using Hierarchy = StoreConformance;

bool canTake(DistributedLockManager& m, const std::string& id) {
  Lock lock = m.getLockInstance(id, LockLevel::DC);
  try {
    m.tryAcquireLock(lock);
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
    return false;
  }
  EXPECT_TRUE(m.releaseLock(lock));
  return true;
}

TEST_P(Hierarchy, HeldNodeBlocksItsAncestorsItselfAndItsDescendants) {
  auto holder = manager();
  auto other = manager();
  Lock ab = holder->getLockInstance("a.b", LockLevel::DC);
  holder->tryAcquireLock(ab);
  EXPECT_FALSE(canTake(*other, "a"));
  EXPECT_FALSE(canTake(*other, "a.b"));
  EXPECT_FALSE(canTake(*other, "a.b.c"));
  EXPECT_FALSE(canTake(*other, "a.b.c.d"));
  EXPECT_TRUE(canTake(*other, "a.c"));
  EXPECT_TRUE(canTake(*other, "a.c.d"));
  EXPECT_TRUE(canTake(*other, "a.bc"));
  EXPECT_TRUE(canTake(*other, "b"));
  EXPECT_TRUE(canTake(*other, "ab"));
  ASSERT_TRUE(holder->releaseLock(ab));
  EXPECT_TRUE(canTake(*other, "a"));
  EXPECT_TRUE(canTake(*other, "a.b.c"));
}

TEST_P(Hierarchy, HeldDescendantBlocksTheRootUntilReleased) {
  auto holder = manager();
  auto other = manager();
  Lock deep = holder->getLockInstance("a.b.c", LockLevel::DC);
  holder->tryAcquireLock(deep);
  Lock root = other->getLockInstance("a", LockLevel::DC);
  try {
    other->tryAcquireLock(root);
    FAIL() << "root taken while a descendant is held";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE);
    EXPECT_NE(std::string(e.what()).find("a.b.c"), std::string::npos)
        << "the message names the blocking lock: " << e.what();
  }
  ASSERT_TRUE(holder->releaseLock(deep));
  other->tryAcquireLock(root);
  EXPECT_TRUE(root.isAcquired());
}

TEST_P(Hierarchy, SiblingsAreHeldAtTheSameTime) {
  auto m1 = manager();
  auto m2 = manager();
  Lock left = m1->getLockInstance("orders.1", LockLevel::DC);
  Lock right = m2->getLockInstance("orders.2", LockLevel::DC);
  m1->tryAcquireLock(left);
  m2->tryAcquireLock(right);
  EXPECT_TRUE(left.isAcquired() && right.isAcquired());
}

TEST_P(Hierarchy, ExpiredDescendantDoesNotBlock) {
  auto holder = manager();
  auto other = manager();
  Lock child = holder->getLockInstance("p.q", LockLevel::DC);
  holder->tryAcquireLock(child, milliseconds(100));
  // Past the real expiry, which may lie up to 1 ms after the floored one.
  waitForStoreTime(holder->store(), child.expiresAt());
  EXPECT_TRUE(canTake(*other, "p"));
}

TEST_P(Hierarchy, ConcurrentSiblingAcquisitionsAllSucceed) {
  // Eight threads take eight different children of one parent at once:
  // none may be refused (they do not conflict), and the parent stays takeable
  // once they are all released.
  constexpr int kThreads = 8;
  // Refusals are what this test is about; on a busy machine eight writers
  // on one SQLite file may wait seconds for its write lock, which is not a
  // refusal: a call budget that a slow machine does not exhaust.
  LockConfiguration config = fastConfig();
  config.operationTimeout = kTestStoreBudget;
  std::vector<std::unique_ptr<DistributedLockManager>> managers;
  for (int i = 0; i < kThreads; ++i) {
    managers.push_back(manager("", "farm1", config));
  }
  std::atomic<int> acquired{0};
  std::atomic<int> refused{0};
  std::mutex errorsMutex;
  std::string errors;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 20; ++round) {
        Lock lock = managers[i]->getLockInstance(
            "parent.child" + std::to_string(i), LockLevel::DC);
        try {
          managers[i]->tryAcquireLock(lock);
          ++acquired;
          managers[i]->releaseLock(lock);
        } catch (const DLMException& e) {
          ++refused;
          std::lock_guard<std::mutex> guard(errorsMutex);
          errors += std::string(e.what()) + "\n";
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused, 0) << errors;
  EXPECT_EQ(acquired, kThreads * 20);
  EXPECT_TRUE(canTake(*managers[0], "parent"));
}

TEST_P(Hierarchy, FlatManagersTreatDotsAsPlainBytes) {
  auto cfg = fastConfig();
  auto flat = DistributedLockManager::builder()
                  .clientId(client())
                  .farmId("farm1")
                  .store(env().newStore())
                  .configuration(cfg)
                  .hierarchy(false)
                  .build();
  flat->initialize();
  Lock child = flat->getLockInstance("a.b", LockLevel::DC);
  Lock parent = flat->getLockInstance("a", LockLevel::DC);
  flat->tryAcquireLock(child);
  flat->tryAcquireLock(parent);
  EXPECT_TRUE(child.isAcquired() && parent.isAcquired());
}

INSTANTIATE_TEST_SUITE_P(Stores, Hierarchy,
                         ::testing::ValuesIn(conformanceStores()), storeParamName);

}  // namespace
}  // namespace dlm::test
