// StoreCalls: a manager's acquire, release and extend calls on its store,
// batched across its threads when LockConfiguration::batchStoreCalls is on
// (call_batcher.h), each made alone otherwise. Same signatures and answers
// as the store's single calls: a lock refused by an error of its own throws
// that error, as the single call would.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "batching/call_batcher.h"
#include "common/hidden.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class DLM_HIDDEN StoreCalls {
 public:
  // `store` must outlive this object.
  StoreCalls(LockStore& store, const LockConfiguration& config);

  AcquireResult tryAcquire(const AcquireRequest& request);
  bool release(const StoreKey& key, std::string_view token, LockMode mode);
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl, LockMode mode);

 private:
  LockStore& store_;
  const std::chrono::milliseconds fallback_;
  std::unique_ptr<CallBatcher<AcquireRequest, AcquireOutcome>> acquire_;
  std::unique_ptr<CallBatcher<ReleaseRequest, ReleaseOutcome>> release_;
  std::unique_ptr<CallBatcher<ExtendRequest, ExtendOutcome>> extend_;
};

}  // namespace dlm::internal
