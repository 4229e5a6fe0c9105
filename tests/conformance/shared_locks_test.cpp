// SHARED locks on every store: the compatibility matrix, several holders,
// takeover across modes, inspection with modes (docs/guide.md "Shared locks and fair
// queueing"). The scenarios live in lock_mode_scenarios.cpp, which the unit
// tests also run on the FakeStore.
#include "conformance/lock_mode_scenarios.h"
#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

class SharedLocks : public StoreConformance {
 protected:
  modes::ManagerFactory managers() {
    return [this] { return manager(); };
  }
};

TEST_P(SharedLocks, CompatibilityMatrixOfModesAndKeys) {
  modes::compatibilityMatrix(managers());
}

TEST_P(SharedLocks, SeveralHoldersEachWithItsOwnTokenAndFencingToken) {
  modes::sharedHoldersTogether(managers());
}

TEST_P(SharedLocks, ExclusiveWaitsForTheLastReader) {
  modes::exclusiveWaitsForTheLastReader(managers());
}

TEST_P(SharedLocks, TakeoverAcrossModes) {
  modes::takeoverAcrossModes(managers());
}

TEST_P(SharedLocks, InspectionShowsEveryHolderAndWaiterWithItsMode) {
  modes::inspectionShowsModes(managers());
}

INSTANTIATE_TEST_SUITE_P(Stores, SharedLocks,
                         ::testing::ValuesIn(conformanceStores()), storeParamName);

}  // namespace
}  // namespace dlm::test
