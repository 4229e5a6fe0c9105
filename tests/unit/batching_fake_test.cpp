// A manager's concurrent calls go to the store as batch calls ("Set-based
// when busy") and keep its guarantees, on the fake store; with
// batchStoreCalls off, no batch call is made. (The same runs on SQLite,
// PostgreSQL and PgBouncer: conformance/batching_test.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "dlm/dlm.h"
#include "support/batching_run.h"
#include "support/fake_store.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

constexpr int kBatchingThreads = 16;

std::unique_ptr<DistributedLockManager> batchingFakeManager(
    std::shared_ptr<LockStore> store, bool batch) {
  auto m = DistributedLockManager::builder()
               .clientId("batching")
               .farmId("farm1")
               .store(std::move(store))
               .configuration(batchingRunConfiguration(batch))
               .build();
  m->initialize();
  return m;
}

TEST(BatchingOnFake, ConcurrentCyclesGoAsBatchesWithoutOverlapOrFencingBack) {
  auto fake = std::make_shared<FakeStore>(/*followRealTime=*/true);
  auto slow = std::make_shared<SlowSinglesStore>(fake, 3ms);
  auto m = batchingFakeManager(slow, true);
  const auto run = runBatchedCycles(
      *m, kBatchingThreads, kBatchingThreads * 40L, kBatchingThreads * 500L,
      [&] {
        return slow->multiAcquireBatches > 0 && slow->multiReleaseBatches > 0;
      });
  EXPECT_GT(slow->multiAcquireBatches, 0) << run.attempts << " attempts";
  EXPECT_GT(slow->multiReleaseBatches, 0) << run.attempts << " attempts";
  EXPECT_GT(slow->largestBatch, 1U);
  expectBatchedCyclesSafe(run, *m, "DC#farm1#batching#");
}

TEST(BatchingOnFake, ConcurrentExtensionsGoAsBatches) {
  auto fake = std::make_shared<FakeStore>(/*followRealTime=*/true);
  auto slow = std::make_shared<SlowSinglesStore>(fake, 3ms);
  auto m = batchingFakeManager(slow, true);
  const int rounds = runBatchedExtensions(
      *m, kBatchingThreads, [&] { return slow->multiExtendBatches > 0; });
  EXPECT_GT(slow->multiExtendBatches, 0) << rounds << " rounds";
}

TEST(BatchingOnFake, WithBatchingOffNoBatchCallIsMade) {
  auto fake = std::make_shared<FakeStore>(/*followRealTime=*/true);
  auto slow = std::make_shared<SlowSinglesStore>(fake, 3ms);
  auto m = batchingFakeManager(slow, false);
  const auto run = runBatchedCycles(*m, kBatchingThreads,
                                    kBatchingThreads * 20L,
                                    kBatchingThreads * 20L, [] { return false; });
  runBatchedExtensions(*m, kBatchingThreads, [] { return false; });
  EXPECT_EQ(slow->batchCalls(), 0);
  // The same calls were made, one by one.
  EXPECT_GE(slow->singleAcquires, kBatchingThreads * 10);
  EXPECT_GT(slow->singleReleases, 0);
  EXPECT_GE(slow->singleExtends, kBatchingThreads * 3);
  expectBatchedCyclesSafe(run, *m, "DC#farm1#batching#");
}

}  // namespace
}  // namespace dlm::test
