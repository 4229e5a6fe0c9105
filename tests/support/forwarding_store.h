// A LockStore that forwards every call to another store: the base for
// fault-injecting and counting stores in tests (leveldb's EnvWrapper).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "dlm/error.h"
#include "dlm/lock_store.h"

namespace dlm::test {

class ForwardingStore : public LockStore {
 public:
  explicit ForwardingStore(std::shared_ptr<LockStore> target)
      : target_(std::move(target)) {}

  std::string_view name() const override { return target_->name(); }
  void initialize(bool apply) override { target_->initialize(apply); }
  void close() override { target_->close(); }
  AcquireResult tryAcquire(const AcquireRequest& r) override {
    return target_->tryAcquire(r);
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    return target_->release(key, token, mode);
  }
  void releaseWithin(AppTransaction& tx, const StoreKey& key,
                     std::string_view token, LockMode mode) override {
    target_->releaseWithin(tx, key, token, mode);
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override {
    return target_->extend(key, token, ttl, mode);
  }
  std::optional<LockRecord> describe(std::string_view key) override {
    return target_->describe(key);
  }
  std::vector<LockRecord> holdersOf(std::string_view key) override {
    return target_->holdersOf(key);
  }
  std::vector<LockRecord> listHeld(std::string_view prefix) override {
    return target_->listHeld(prefix);
  }
  std::vector<WaitRecord> listWaiters(std::string_view prefix) override {
    return target_->listWaiters(prefix);
  }
  SchemaState schemaState() override { return target_->schemaState(); }
  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) override {
    return target_->purgeIdle(idleFor, batchSize, dryRun);
  }
  bool forceRelease(std::string_view key) override {
    return target_->forceRelease(key);
  }
  StoreTime now() override { return target_->now(); }
  void addClient(std::string_view clientId) noexcept override {
    target_->addClient(clientId);
  }
  WaitRegistration registerWait(const WaitRequest& request) override {
    return target_->registerWait(request);
  }
  std::uint64_t reconnections() const override {
    return target_->reconnections();
  }
  void unregisterWait(std::string_view key, std::string_view owner) override {
    target_->unregisterWait(key, owner);
  }
  bool subscribeReleases(ReleaseListener* listener) override {
    return target_->subscribeReleases(listener);
  }
  void unsubscribeReleases(ReleaseListener* listener) override {
    target_->unsubscribeReleases(listener);
  }

 protected:
  std::shared_ptr<LockStore> target_;
};

// Counts calls and throws queued failures before forwarding.
class CountingStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;

  std::atomic<int> calls{0};
  std::atomic<int> acquires{0};
  std::atomic<int> releases{0};

  // The next calls (of any kind) throw these, in order.
  void failNext(DLMException e) {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.push_back(std::move(e));
  }

  void initialize(bool apply) override {
    count();
    ForwardingStore::initialize(apply);
  }
  AcquireResult tryAcquire(const AcquireRequest& r) override {
    count();
    ++acquires;
    return ForwardingStore::tryAcquire(r);
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    count();
    ++releases;
    return ForwardingStore::release(key, token, mode);
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override {
    count();
    return ForwardingStore::extend(key, token, ttl, mode);
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
