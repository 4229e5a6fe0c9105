// Fair queueing and deadlock detection across modes on every store (docs/guide.md
// "Shared locks and fair queueing"). The scenarios live in
// lock_mode_scenarios.cpp, which the unit tests also run on the FakeStore.
#include "conformance/lock_mode_scenarios.h"
#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

class FairQueueing : public StoreConformance {
 protected:
  modes::ManagerFactory managers() {
    return [this] { return manager(); };
  }
};

TEST_P(FairQueueing, WaitingExclusiveHoldsBackNewcomersUntilItGivesUp) {
  modes::waitingExclusiveHoldsBackNewcomers(managers());
}

TEST_P(FairQueueing, WaitingSharedHoldsBackOnlyExclusiveAttempts) {
  modes::waitingSharedHoldsBackOnlyExclusive(managers());
}

TEST_P(FairQueueing, ParentServedWhileChildrenKeepArriving) {
  modes::parentServedWhileChildrenKeepArriving(managers());
}

TEST_P(FairQueueing, WriterServedWhileReadersKeepArriving) {
  modes::writerServedWhileReadersKeepArriving(managers());
}

TEST_P(FairQueueing, UpgradeFromSharedToExclusiveIsADeadlock) {
  modes::upgradeIsADeadlock(managers());
}

TEST_P(FairQueueing, QueueEdgeClosesADeadlock) {
  modes::queueEdgeClosesADeadlock(managers());
}

INSTANTIATE_TEST_SUITE_P(Stores, FairQueueing,
                         ::testing::ValuesIn(conformanceStores()), storeParamName);

}  // namespace
}  // namespace dlm::test
