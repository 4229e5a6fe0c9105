// An in-memory LockStore with the stores' semantics (hierarchy, lock modes,
// tokens, fencing, expiry, fair queueing, the wait-for graph) and a settable
// clock, for fast manager tests.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"

namespace dlm::test {

// The FakeStore's application transaction: releases done through it apply
// at commit() and vanish at rollback().
class FakeTransaction final : public AppTransaction {
 public:
  void commit();
  void rollback() { pending_.clear(); }
  // Set when a commitLock or guardWithin found its lock gone: commit() then
  // throws.
  bool doomed() const { return doomed_; }

 private:
  friend class FakeStore;
  std::vector<std::function<void()>> pending_;
  bool doomed_ = false;
};

class FakeStore final : public LockStore, public LockStoreAdmin {
 public:
  // A store whose clock stands still until advance() moves it.
  FakeStore() = default;
  // With followRealTime, the store's clock is the system clock (plus what
  // advance() added): for scenarios that wait for expiry in real time.
  explicit FakeStore(bool followRealTime) : realTime_(followRealTime) {}

  std::string_view name() const override { return "fake"; }
  LockStoreAdmin* admin() override { return this; }
  void initialize(bool) override {}
  void close() override {}
  AcquireResult tryAcquire(const AcquireRequest& request) override;
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override;
  void commitLock(AppTransaction& tx, const StoreKey& key,
                  std::string_view token, LockMode mode) override;
  // Checks the hold (unexpired, this token) and dooms `tx` when it is gone;
  // takeovers are not held back (the fake has no concurrent transactions).
  void guardWithin(AppTransaction& tx, const StoreKey& key,
                   std::string_view token, LockMode mode) override;
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override;
  std::optional<LockRecord> describe(std::string_view key) override;
  std::vector<LockRecord> holdersOf(std::string_view key) override;
  std::vector<LockRecord> listHeld(std::string_view prefix) override;
  std::vector<WaitRecord> listWaiters(std::string_view prefix) override;
  // What setSchemaState set; by default a present schema with no version
  // rows (the fake has no schema to apply).
  SchemaState schemaState() override;
  PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                       bool dryRun) override;
  bool forceRelease(std::string_view key) override;
  int cancelRequests(std::string_view key,
                     std::optional<std::string_view> owner) override;
  StoreTime now() override;
  WaitRegistration registerWait(const WaitRequest& request) override;
  void unregisterWait(std::string_view key, std::string_view owner) override;
  bool subscribeReleases(ReleaseListener* listener) override;
  void unsubscribeReleases(ReleaseListener* listener) override;
  void addWarningListener(StoreWarningListener* listener) noexcept override;
  void removeWarningListener(StoreWarningListener* listener) noexcept override;

  // Tells the warning listeners `message`, as a store that noticed
  // something would.
  void warn(std::string_view message);

  // Live request rows, as "owner waits for key".
  std::vector<std::pair<std::string, std::string>> requests();
  // The maxWait of every registerWait so far, in call order.
  std::vector<std::chrono::milliseconds> registeredWaits();
  // With false, subscribeReleases refuses (waiters poll).
  void setNotifies(bool on) { notifies_ = on; }
  // What schemaState() answers from now on.
  void setSchemaState(SchemaState state);

  // Moves the store's clock forward.
  void advance(std::chrono::milliseconds by);

 private:
  // One SHARED hold of a key.
  struct SharedHold {
    LockRecord record;
    std::string token;
  };
  // A key's row: its EXCLUSIVE state and fencing counter
  // (record.fencingToken), and its SHARED holds, oldest first.
  struct Row {
    LockRecord record;
    std::string token;
    std::vector<SharedHold> shared;
  };
  struct Request {
    StoreKey key;
    StoreTime requestedAt;
    StoreTime expiresAt;
    LockMode mode = LockMode::EXCLUSIVE;
    std::optional<StoreTime> deadline;  // the waiter's own, if it said
  };
  using RequestId = std::pair<std::string, std::string>;  // (owner, key)
  std::vector<std::chrono::milliseconds> registeredWaits_;

  // The store's clock; callers hold mutex_.
  StoreTime clock() const;
  bool heldAt(const Row& row, StoreTime at) const;
  bool freeRow(std::string_view key, std::string_view token);
  bool dropShared(std::string_view key, std::string_view token);
  // Calls fn(key, row) for the rows of `key`, its ancestors (root first)
  // and its descendants (key order), in that order.
  template <typename Fn>
  void forRelated(const StoreKey& key, Fn&& fn);
  // Live holds that conflict with `mode` on `key`: (owner, held key), the
  // key itself first, then ancestors, then descendants.
  std::vector<std::pair<std::string, std::string>> blockers(const StoreKey& key,
                                                            LockMode mode);
  // Live requests of owners other than `owner` that conflict with `mode` on
  // `key` and are older than (since, owner) (all such when `since` is
  // empty), oldest first.
  std::vector<RequestId> queuedBefore(const StoreKey& key, LockMode mode,
                                      std::string_view owner,
                                      std::optional<StoreTime> since);
  void announce(std::string_view key);

  std::mutex mutex_;
  std::map<std::string, Row, std::less<>> rows_;
  bool realTime_ = false;
  StoreTime now_ = StoreTime(std::chrono::hours(24 * 365 * 50));
  std::chrono::milliseconds offset_{0};
  // (owner, key) -> request.
  std::map<RequestId, Request> requests_;
  std::set<ReleaseListener*> listeners_;
  std::set<StoreWarningListener*> warningListeners_;
  bool notifies_ = true;
  SchemaState schema_{true, {}};
  // Rows created from now on start their fencing tokens here (purgeIdle).
  std::int64_t fencingFloor_ = 0;
};

}  // namespace dlm::test
