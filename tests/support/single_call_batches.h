// A base for test decorators that change a single call (tryAcquire, release,
// extend) to count it or inject a fault: its batch calls (tryAcquireEach,
// releaseEach, extendEach, tryAcquireAll) go one by one through the
// decorator's own single calls (LockStore's defaults) instead of straight to
// the wrapped store as LockStoreWrapper sends them. So a manager that batches
// its threads' calls (LockConfiguration::batchStoreCalls, on by default)
// meets the decorator's faults and counts on every lock, batched or not.
#pragma once

#include <vector>

#include "dlm/lock_store_wrapper.h"

namespace dlm::test {

class SingleCallBatches : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;

  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override {
    return LockStore::tryAcquireEach(requests);
  }
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override {
    return LockStore::releaseEach(requests);
  }
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override {
    return LockStore::extendEach(requests);
  }
  AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests) override {
    return LockStore::tryAcquireAll(requests);
  }
};

}  // namespace dlm::test
