// A manager's concurrent calls go to the store as batch calls ("Set-based
// when busy") and keep its guarantees on each store: 16 threads of one
// manager in tryAcquireLock / releaseLock cycles on keys of their own and
// shared ones, no overlap, fencing tokens never back; concurrent
// extensions batched too; with batchStoreCalls off, no batch call.
#include <chrono>
#include <cstdio>
#include <memory>

#include "conformance/store_fixture.h"
#include "support/batching_run.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

constexpr int kConformanceBatchThreads = 16;

class Batching : public StoreConformance {
 protected:
  // A manager of this test's client on `store`, batching as told.
  std::unique_ptr<DistributedLockManager> batchingManager(
      std::shared_ptr<LockStore> store, bool batch) {
    auto m = DistributedLockManager::builder()
                 .clientId(client())
                 .farmId("farm1")
                 .store(std::move(store))
                 .configuration(batchingRunConfiguration(batch))
                 .build();
    m->initialize();
    return m;
  }
  std::string heldPrefix() const { return "DC#farm1#" + client() + "#"; }
};

TEST_P(Batching, ConcurrentCyclesGoAsBatchesWithoutOverlapOrFencingBack) {
  auto slow = std::make_shared<SlowSinglesStore>(env().newStore(), 3ms);
  auto m = batchingManager(slow, true);
  const auto run = runBatchedCycles(
      *m, kConformanceBatchThreads, kConformanceBatchThreads * 40L,
      kConformanceBatchThreads * 500L, [&] {
        return slow->multiAcquireBatches > 0 && slow->multiReleaseBatches > 0;
      });
  std::printf("[ batching ] %ld attempts; batch calls: %d acquire (%d of "
              "several), %d release (%d of several), largest %zu\n",
              run.attempts, slow->acquireBatches.load(),
              slow->multiAcquireBatches.load(), slow->releaseBatches.load(),
              slow->multiReleaseBatches.load(), slow->largestBatch.load());
  EXPECT_GT(slow->multiAcquireBatches, 0) << run.attempts << " attempts";
  EXPECT_GT(slow->multiReleaseBatches, 0) << run.attempts << " attempts";
  expectBatchedCyclesSafe(run, *m, heldPrefix());
}

TEST_P(Batching, ConcurrentExtensionsGoAsBatches) {
  auto slow = std::make_shared<SlowSinglesStore>(env().newStore(), 3ms);
  auto m = batchingManager(slow, true);
  const int rounds = runBatchedExtensions(
      *m, kConformanceBatchThreads,
      [&] { return slow->multiExtendBatches > 0; });
  EXPECT_GT(slow->multiExtendBatches, 0) << rounds << " rounds";
  EXPECT_TRUE(adminOf(m->store()).listHeld(heldPrefix()).empty());
}

TEST_P(Batching, WithBatchingOffNoBatchCallIsMade) {
  auto slow = std::make_shared<SlowSinglesStore>(env().newStore(), 3ms);
  auto m = batchingManager(slow, false);
  const auto run = runBatchedCycles(
      *m, kConformanceBatchThreads, kConformanceBatchThreads * 10L,
      kConformanceBatchThreads * 10L, [] { return false; });
  runBatchedExtensions(*m, kConformanceBatchThreads, [] { return false; });
  EXPECT_EQ(slow->batchCalls(), 0);
  EXPECT_GE(slow->singleAcquires, kConformanceBatchThreads * 5);
  EXPECT_GT(slow->singleReleases, 0);
  EXPECT_GE(slow->singleExtends, kConformanceBatchThreads * 3);
  expectBatchedCyclesSafe(run, *m, heldPrefix());
}

INSTANTIATE_TEST_SUITE_P(Stores, Batching,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
