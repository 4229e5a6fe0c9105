// Renews the leases of LockGuards that asked for keep-alive: one thread per
// manager, started with the first guard, each lock renewed at a third of its
// TTL.
//
// A lease is declared lost (onLost) when its last confirmed end, minus a
// safety margin (lossMargin), passes without a confirmed renewal. The thread
// never waits for a hung store past that point: every renewal runs under a
// deadline no later than the earliest loss time of any guarded lease. The
// state a guard reads (lost, expiresAt) is never locked during store calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock_events.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class Telemetry;

using LostCallback = std::function<void(const DLMException& why)>;
using SteadyTime = std::chrono::steady_clock::time_point;

// The margin before a lease's estimated end at which it is declared lost:
// a tenth of the TTL, at least 20 ms and at most 2 s.
std::chrono::milliseconds lossMargin(std::chrono::milliseconds ttl);

// The renewal state of one guarded lock, shared by the guard and the thread.
struct KeepAliveEntry {
  StoreKey key;
  LockMode mode = LockMode::EXCLUSIVE;
  std::string token;
  std::chrono::milliseconds ttl{0};
  std::string lockId;    // the application's name, for events
  std::string lockName;  // for messages
  std::int64_t fencingToken = 0;
  SteadyTime acquiredAt;  // steady clock, when the acquiring call began
  LostCallback onLost;

  // Guards the fields below; held only for a few instructions, never during
  // a store call or a callback.
  mutable std::mutex mutex;
  std::condition_variable idle;  // signalled when renewing becomes false
  StoreTime expiresAt;
  bool lost = false;
  bool cancelled = false;
  bool renewing = false;
  SteadyTime nextRenewal;
  // When the lease ends as this process's steady clock estimates it: the
  // start of the last successful acquire or renewal call plus the TTL (the
  // store computed its expiry at some instant after that start).
  SteadyTime leaseEnd;

  SteadyTime lossAt() const { return leaseEnd - lossMargin(ttl); }
};

class KeepAlive {
 public:
  // `store` must outlive this object; renewals run under a deadline of at
  // most `operationTimeout`.
  // `telemetry` (may be null) counts renewals and losses and reports them
  // as events, from the keep-alive thread with no lock held.
  KeepAlive(LockStore& store, std::chrono::milliseconds operationTimeout,
            Telemetry* telemetry = nullptr)
      : store_(store),
        operationTimeout_(operationTimeout),
        telemetry_(telemetry) {}
  ~KeepAlive();
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  // Starts renewing `key` held by `token` in `mode` with `ttl`: the lease ends
  // at `expiresAt` by the store's clock and at `leaseEnd` by this process's
  // steady clock. `onLost` (may be empty) runs on the keep-alive thread once,
  // when a renewal finds the lock lost or the lease's loss time passes.
  std::shared_ptr<KeepAliveEntry> add(
      StoreKey key, LockMode mode, std::string token,
      std::chrono::milliseconds ttl, StoreTime expiresAt, SteadyTime leaseEnd,
      std::string lockId, std::int64_t fencingToken, LostCallback onLost);
  // Stops renewing; once this returns, no renewal or onLost call for the
  // entry is running or will run. Waits for a renewal in progress (bounded
  // by its deadline).
  void remove(const std::shared_ptr<KeepAliveEntry>& entry);
  // Renews every lease now instead of at its turn: the store may have lost
  // them (its announcements were interrupted, its file vanished).
  void renewAllNow();

 private:
  void run();
  // What one renewal round did to an entry.
  struct Renewal {
    std::shared_ptr<KeepAliveEntry> entry;
    bool renewed = false;  // extended
    bool lost = false;     // found lost (report it)
  };
  // Renews every entry of `due` (not cancelled or lost) in one store call
  // (LockStore::extendEach; a lone one with extend) under `deadline`; each
  // entry's outcome is its own.
  std::vector<Renewal> renewAll(
      const std::vector<std::shared_ptr<KeepAliveEntry>>& due,
      SteadyTime deadline);
  bool reportLost(KeepAliveEntry& entry);
  void emit(const KeepAliveEntry& entry, LockEventKind kind);
  // A STORE_ERROR event for a renewal the store failed.
  void emitStoreError(const KeepAliveEntry& entry,
                      const DLMException& why) noexcept;

  LockStore& store_;
  const std::chrono::milliseconds operationTimeout_;
  Telemetry* const telemetry_;
  std::mutex mutex_;  // guards entries_, stop_, thread_
  std::condition_variable changed_;
  std::vector<std::shared_ptr<KeepAliveEntry>> entries_;
  bool stop_ = false;
  std::thread thread_;
  // Held while an onLost callback runs, so remove() can wait it out.
  std::mutex dispatchMutex_;
};

}  // namespace dlm::internal
