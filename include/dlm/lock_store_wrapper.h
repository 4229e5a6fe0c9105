// A store that forwards every call to another store: the base of
// decorators (fault injection, counting, tracing, a cache of the admin
// side), as leveldb's EnvWrapper is for its Env. Derive from it and
// override only the calls to change; the rest reach the wrapped store
// unchanged, including calls added to the interface later.
//
// For those who write a store decorator or a tool; application programs
// need not include this file.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "dlm/export.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"

namespace dlm {

class DLM_API LockStoreWrapper : public LockStore, public LockStoreAdmin {
 public:
  // `target` must not be null.
  explicit LockStoreWrapper(std::shared_ptr<LockStore> target)
      : target_(std::move(target)) {}

  LockStore& target() const { return *target_; }

  // Protocol calls.
  std::string_view name() const override { return target_->name(); }
  // This wrapper, when the wrapped store has an admin side (so a decorator
  // sees those calls too); nullptr otherwise.
  LockStoreAdmin* admin() override {
    return target_->admin() != nullptr ? this : nullptr;
  }
  void initialize(bool applyMigrations) override {
    target_->initialize(applyMigrations);
  }
  void close() override { target_->close(); }
  AcquireResult tryAcquire(const AcquireRequest& request) override {
    return target_->tryAcquire(request);
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    return target_->release(key, token, mode);
  }
  void commitLock(AppTransaction& tx, const StoreKey& key,
                  std::string_view token, LockMode mode) override {
    target_->commitLock(tx, key, token, mode);
  }
  void guardWithin(AppTransaction& tx, const StoreKey& key,
                   std::string_view token, LockMode mode) override {
    target_->guardWithin(tx, key, token, mode);
  }
  // The batch calls go to the wrapped store as batches. A decorator that
  // changes a single call (tryAcquire, release, extend) and wants batches to
  // see that change overrides the batch call too, as
  // `return LockStore::tryAcquireEach(requests);` (one by one, through its
  // own single call).
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override {
    return target_->tryAcquireEach(requests);
  }
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override {
    return target_->releaseEach(requests);
  }
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override {
    return target_->extendEach(requests);
  }
  AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests) override {
    return target_->tryAcquireAll(requests);
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override {
    return target_->extend(key, token, ttl, mode);
  }
  WaitRegistration registerWait(const WaitRequest& request) override {
    return target_->registerWait(request);
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
  std::uint64_t reconnections() const override {
    return target_->reconnections();
  }
  StoreTime now() override { return target_->now(); }
  void addClient(std::string_view clientId) noexcept override {
    target_->addClient(clientId);
  }
  std::string listedOwner(std::string_view owner) const override {
    return target_->listedOwner(owner);
  }
  void addWarningListener(StoreWarningListener* listener) noexcept override {
    target_->addWarningListener(listener);
  }
  void removeWarningListener(StoreWarningListener* listener) noexcept override {
    target_->removeWarningListener(listener);
  }

  // Inspection and admin calls: to the wrapped store's admin side
  // (INVALID_ARGUMENT when it has none, as adminOf).
  std::optional<LockRecord> describe(std::string_view key) override {
    return adminOf(*target_).describe(key);
  }
  std::vector<LockRecord> holdersOf(std::string_view key) override {
    return adminOf(*target_).holdersOf(key);
  }
  std::vector<LockRecord> listHeld(std::string_view keyPrefix) override {
    return adminOf(*target_).listHeld(keyPrefix);
  }
  std::vector<WaitRecord> listWaiters(std::string_view keyPrefix) override {
    return adminOf(*target_).listWaiters(keyPrefix);
  }
  SchemaState schemaState() override { return adminOf(*target_).schemaState(); }
  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) override {
    return adminOf(*target_).purgeIdle(idleFor, batchSize, dryRun);
  }
  bool forceRelease(std::string_view key) override {
    return adminOf(*target_).forceRelease(key);
  }
  int cancelRequests(std::string_view key,
                     std::optional<std::string_view> owner) override {
    return adminOf(*target_).cancelRequests(key, owner);
  }
  std::vector<ClientBinding> listClients() override {
    return adminOf(*target_).listClients();
  }
  void bindClient(std::string_view clientId, std::string_view role) override {
    adminOf(*target_).bindClient(clientId, role);
  }
  bool unbindClient(std::string_view clientId) override {
    return adminOf(*target_).unbindClient(clientId);
  }
  ClientPurge purgeClient(std::string_view clientId) override {
    return adminOf(*target_).purgeClient(clientId);
  }
  ClientPurge rebindClient(std::string_view clientId,
                           std::string_view role) override {
    return adminOf(*target_).rebindClient(clientId, role);
  }

 protected:
  std::shared_ptr<LockStore> target_;
};

}  // namespace dlm
