// LockStore's batch calls for a store that has none of its own: the single
// calls one by one (see dlm/lock_store.h).

#include "common/key_order.h"
#include "dlm/lock_store.h"

namespace dlm {

std::vector<AcquireOutcome> LockStore::tryAcquireEach(
    const std::vector<AcquireRequest>& requests) {
  std::vector<AcquireOutcome> outcomes(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      outcomes[i].result = tryAcquire(requests[i]);
    } catch (const DLMException& e) {
      outcomes[i].error = e;
    }
  }
  return outcomes;
}

std::vector<ReleaseOutcome> LockStore::releaseEach(
    const std::vector<ReleaseRequest>& requests) {
  std::vector<ReleaseOutcome> outcomes(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    try {
      outcomes[i].released =
          release(requests[i].key, requests[i].token, requests[i].mode);
    } catch (const DLMException& e) {
      outcomes[i].error = e;
    }
  }
  return outcomes;
}

std::vector<ExtendOutcome> LockStore::extendEach(
    const std::vector<ExtendRequest>& requests) {
  std::vector<ExtendOutcome> outcomes(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ExtendRequest& r = requests[i];
    try {
      outcomes[i].expiresAt = extend(r.key, r.token, r.ttl, r.mode);
    } catch (const DLMException& e) {
      outcomes[i].error = e;
    }
  }
  return outcomes;
}

AcquireAllResult LockStore::tryAcquireAll(
    const std::vector<AcquireRequest>& requests) {
  const std::vector<std::size_t> order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
  AcquireAllResult all;
  all.results.resize(requests.size());
  std::vector<std::size_t> taken;
  const auto giveBack = [&]() noexcept {
    for (const std::size_t i : taken) {
      try {
        release(requests[i].key, requests[i].token, requests[i].mode);
      } catch (const DLMException&) {
        // Left to its TTL; the caller never learns this token.
      }
    }
  };
  for (const std::size_t i : order) {
    AcquireResult result;
    try {
      result = tryAcquire(requests[i]);
    } catch (...) {
      giveBack();
      throw;
    }
    if (!result.acquired) {
      giveBack();
      AcquireAllResult refused;
      refused.results.resize(requests.size());
      refused.blockedBy = result.blockedBy;
      refused.queued = result.queued;
      return refused;
    }
    all.results[i] = std::move(result);
    taken.push_back(i);
  }
  all.acquired = true;
  return all;
}

}  // namespace dlm
