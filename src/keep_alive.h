// Renews the leases of LockGuards that asked for keep-alive: one thread per
// manager, started with the first guard, each lock renewed at a third of its
// TTL.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

using LostCallback = std::function<void(const DLMException& why)>;

// The renewal state of one guarded lock, shared by the guard and the thread.
struct KeepAliveEntry {
  StoreKey key;
  std::string token;
  std::chrono::milliseconds ttl{0};
  std::string lockName;  // for messages
  LostCallback onLost;

  std::mutex mutex;  // guards the fields below
  StoreTime expiresAt;
  bool lost = false;
  bool cancelled = false;
  std::chrono::steady_clock::time_point nextRenewal;
  // When the lease runs out as this process's steady clock estimates it.
  std::chrono::steady_clock::time_point deadline;
};

class KeepAlive {
 public:
  explicit KeepAlive(LockStore& store) : store_(store) {}
  ~KeepAlive();
  KeepAlive(const KeepAlive&) = delete;
  KeepAlive& operator=(const KeepAlive&) = delete;

  // Starts renewing `key` held by `token` with `ttl` (the lease now ends at
  // `expiresAt`). `onLost` (may be empty) runs on the keep-alive thread once
  // a renewal finds the lock lost or the lease ran out while the store was
  // unreachable.
  std::shared_ptr<KeepAliveEntry> add(StoreKey key, std::string token,
                                      std::chrono::milliseconds ttl,
                                      StoreTime expiresAt, std::string lockName,
                                      LostCallback onLost);
  // Stops renewing; once this returns, no renewal or onLost call for the
  // entry is running or will run.
  void remove(const std::shared_ptr<KeepAliveEntry>& entry);

 private:
  void run();
  // Renews one due entry; true when it was found lost.
  bool renew(KeepAliveEntry& entry);

  LockStore& store_;
  std::mutex mutex_;  // guards entries_, stop_, thread_
  std::condition_variable changed_;
  std::vector<std::shared_ptr<KeepAliveEntry>> entries_;
  bool stop_ = false;
  std::thread thread_;
  // Held while an onLost callback runs, so remove() can wait it out.
  std::mutex dispatchMutex_;
};

}  // namespace dlm::internal
