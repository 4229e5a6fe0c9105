// A store decorator for tests: counts calls and throws queued failures
// before forwarding to the wrapped store.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>

#include "dlm/error.h"
#include "dlm/lock_store_wrapper.h"

namespace dlm::test {

// Counts calls and throws queued failures before forwarding.
class CountingStore final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;

  std::atomic<int> calls{0};
  // tryAcquire calls that got past the queued failures.
  std::atomic<int> acquires{0};
  // Every tryAcquire call, failed ones too.
  std::atomic<int> acquireAttempts{0};
  std::atomic<int> releases{0};

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

 private:
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
