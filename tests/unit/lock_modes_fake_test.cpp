// The manager with SHARED locks and fair queueing on the FakeStore: the
// conformance scenarios of lock_mode_scenarios.cpp, on a fake whose clock
// follows real time (the scenarios wait for expiry and deadlines).
#include <gtest/gtest.h>

#include <memory>

#include "conformance/lock_mode_scenarios.h"
#include "dlm/dlm.h"
#include "support/fake_store.h"

namespace dlm::test {
namespace {

class LockModesOnFake : public ::testing::Test {
 protected:
  modes::ManagerFactory managers() {
    return [this] {
      LockConfiguration config;
      config.lockTtl = std::chrono::seconds(30);
      config.waitForLock = std::chrono::seconds(5);
      config.sleepBetweenRetries = std::chrono::milliseconds(20);
      auto m = DistributedLockManager::builder()
                   .clientId("modes")
                   .farmId("farm1")
                   .store(store_)
                   .configuration(config)
                   .build();
      m->initialize();
      return m;
    };
  }
  std::shared_ptr<FakeStore> store_ = std::make_shared<FakeStore>(true);
};

TEST_F(LockModesOnFake, CompatibilityMatrixOfModesAndKeys) {
  modes::compatibilityMatrix(managers());
}
TEST_F(LockModesOnFake, SeveralHoldersEachWithItsOwnTokenAndFencingToken) {
  modes::sharedHoldersTogether(managers());
}
TEST_F(LockModesOnFake, ExclusiveWaitsForTheLastReader) {
  modes::exclusiveWaitsForTheLastReader(managers());
}
TEST_F(LockModesOnFake, TakeoverAcrossModes) {
  modes::takeoverAcrossModes(managers());
}
TEST_F(LockModesOnFake, InspectionShowsEveryHolderAndWaiterWithItsMode) {
  modes::inspectionShowsModes(managers());
}
TEST_F(LockModesOnFake, WaitingExclusiveHoldsBackNewcomersUntilItGivesUp) {
  modes::waitingExclusiveHoldsBackNewcomers(managers());
}
TEST_F(LockModesOnFake, WaitingSharedHoldsBackOnlyExclusiveAttempts) {
  modes::waitingSharedHoldsBackOnlyExclusive(managers());
}
TEST_F(LockModesOnFake, ParentServedWhileChildrenKeepArriving) {
  modes::parentServedWhileChildrenKeepArriving(managers());
}
TEST_F(LockModesOnFake, WriterServedWhileReadersKeepArriving) {
  modes::writerServedWhileReadersKeepArriving(managers());
}
TEST_F(LockModesOnFake, UpgradeFromSharedToExclusiveIsADeadlock) {
  modes::upgradeIsADeadlock(managers());
}
TEST_F(LockModesOnFake, QueueEdgeClosesADeadlock) {
  modes::queueEdgeClosesADeadlock(managers());
}

}  // namespace
}  // namespace dlm::test
