#include "batching/store_calls.h"

namespace dlm::internal {
namespace {

// A lock's own error is thrown to its caller, as the single call throws it.
template <typename Outcome>
Outcome checked(Outcome outcome) {
  if (outcome.error) throw *outcome.error;
  return outcome;
}

}  // namespace

StoreCalls::StoreCalls(LockStore& store, const LockConfiguration& config)
    : store_(store), fallback_(config.operationTimeout) {
  if (!config.batchStoreCalls) return;
  const auto size = static_cast<std::size_t>(config.maxBatchSize);
  const int inFlight = config.maxBatchesInFlight;
  // A batch of one is the single call: its errors are thrown as they come.
  acquire_ = std::make_unique<CallBatcher<AcquireRequest, AcquireOutcome>>(
      [this](const std::vector<AcquireRequest>& requests) {
        if (requests.size() > 1) return store_.tryAcquireEach(requests);
        std::vector<AcquireOutcome> one(1);
        one[0].result = store_.tryAcquire(requests[0]);
        return one;
      },
      size, inFlight);
  release_ = std::make_unique<CallBatcher<ReleaseRequest, ReleaseOutcome>>(
      [this](const std::vector<ReleaseRequest>& requests) {
        if (requests.size() > 1) return store_.releaseEach(requests);
        std::vector<ReleaseOutcome> one(1);
        one[0].released = store_.release(requests[0].key, requests[0].token,
                                         requests[0].mode);
        return one;
      },
      size, inFlight);
  extend_ = std::make_unique<CallBatcher<ExtendRequest, ExtendOutcome>>(
      [this](const std::vector<ExtendRequest>& requests) {
        if (requests.size() > 1) return store_.extendEach(requests);
        const ExtendRequest& r = requests[0];
        std::vector<ExtendOutcome> one(1);
        one[0].expiresAt = store_.extend(r.key, r.token, r.ttl, r.mode);
        return one;
      },
      size, inFlight);
}

AcquireResult StoreCalls::tryAcquire(const AcquireRequest& request) {
  if (!acquire_) return store_.tryAcquire(request);
  return checked(acquire_->call(request, fallback_)).result;
}

bool StoreCalls::release(const StoreKey& key, std::string_view token,
                         LockMode mode) {
  if (!release_) return store_.release(key, token, mode);
  return checked(release_->call(ReleaseRequest{key, token, mode}, fallback_))
      .released;
}

std::optional<StoreTime> StoreCalls::extend(std::string_view key,
                                            std::string_view token,
                                            std::chrono::milliseconds ttl,
                                            LockMode mode) {
  if (!extend_) return store_.extend(key, token, ttl, mode);
  return checked(extend_->call(ExtendRequest{key, token, ttl, mode}, fallback_))
      .expiresAt;
}

}  // namespace dlm::internal
