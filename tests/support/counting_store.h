// A store decorator for tests: counts calls and throws queued failures
// before forwarding to the wrapped store. Batch calls go one by one through
// its single calls (support/single_call_batches.h), so the counts and the
// failures see every lock; each batch call is counted too.
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "dlm/error.h"
#include "support/single_call_batches.h"

namespace dlm::test {

// Counts calls and throws queued failures before forwarding.
class CountingStore final : public SingleCallBatches {
 public:
  using SingleCallBatches::SingleCallBatches;

  std::atomic<int> calls{0};
  // tryAcquire calls that got past the queued failures.
  std::atomic<int> acquires{0};
  // Every tryAcquire call, failed ones too.
  std::atomic<int> acquireAttempts{0};
  std::atomic<int> releases{0};
  // Batch calls (each lock of one is counted above as a single call too).
  std::atomic<int> acquireBatches{0};
  std::atomic<int> releaseBatches{0};
  std::atomic<int> extendBatches{0};
  std::atomic<int> acquireAllCalls{0};
  // The most requests one batch call carried.
  std::atomic<std::size_t> largestBatch{0};

  // The next calls (of any kind) throw these, in order.
  void failNext(DLMException e) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.push_back(std::move(e));
  }

  void initialize(bool apply) override {
    count();
    LockStoreWrapper::initialize(apply);
  }
  AcquireResult tryAcquire(const AcquireRequest& r) override {
    ++acquireAttempts;
    count();
    ++acquires;
    return LockStoreWrapper::tryAcquire(r);
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    count();
    ++releases;
    return LockStoreWrapper::release(key, token, mode);
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override {
    count();
    return LockStoreWrapper::extend(key, token, ttl, mode);
  }
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override {
    ++acquireBatches;
    sized(requests.size());
    return SingleCallBatches::tryAcquireEach(requests);
  }
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override {
    ++releaseBatches;
    sized(requests.size());
    return SingleCallBatches::releaseEach(requests);
  }
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override {
    ++extendBatches;
    sized(requests.size());
    return SingleCallBatches::extendEach(requests);
  }
  AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests) override {
    ++acquireAllCalls;
    sized(requests.size());
    return SingleCallBatches::tryAcquireAll(requests);
  }

 private:
  void sized(std::size_t n) {
    std::size_t seen = largestBatch.load();
    while (n > seen && !largestBatch.compare_exchange_weak(seen, n)) {
    }
  }
  void count() {
    ++calls;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failures_.empty()) {
      DLMException e = failures_.front();
      failures_.pop_front();
      throw e;
    }
  }

  std::mutex mutex_;
  std::deque<DLMException> failures_;
};

}  // namespace dlm::test
