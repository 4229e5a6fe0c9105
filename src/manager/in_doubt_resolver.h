// Acquisitions the manager no longer tracks but that may still hold a row,
// and how they are freed without waiting out their TTL.
//
// - In doubt: an acquire whose outcome is unknown (the store did not answer,
//   or its reply was lost after the server committed). Its token is kept and
//   released in the background as soon as the store answers again (release
//   is conditional on the token, so this never frees someone else's lock).
// - Stale request rows: a wait's request row that could not be deleted when
//   the wait ended; deleted when the same owner's next wait meets it in a
//   cycle, so that it is not reported as a deadlock.
// - Recently released: a release that returned true but committed lazily
//   (PostgreSQL: synchronous_commit off) and may be undone by a server crash.
//   Kept for a while only so that, when the same owner then finds the key
//   blocked by its own owner, the manager can release it again by token
//   instead of reporting a deadlock or waiting out the TTL.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlm/lock_store.h"

namespace dlm::internal {

class InDoubtResolver {
 public:
  // How many recent releases are remembered per manager (the oldest go
  // first); a crash undoes at most the last few hundred milliseconds of
  // lazily committed releases.
  static constexpr std::size_t kMaxRemembered = 4096;
  // Pause between two background rounds while in-doubt tokens remain.
  static constexpr std::chrono::milliseconds kRetryPause{200};

  // `store` must outlive the resolver; each background release runs under a
  // deadline of `operationTimeout`.
  InDoubtResolver(LockStore& store, std::chrono::milliseconds operationTimeout);
  // Stops the background thread (waits for a release in progress, which its
  // deadline bounds).
  ~InDoubtResolver();
  InDoubtResolver(const InDoubtResolver&) = delete;
  InDoubtResolver& operator=(const InDoubtResolver&) = delete;

  // `token` may hold `key` for up to `ttl`; release it as soon as the store
  // answers. Starts the background thread on first use.
  void addInDoubt(const StoreKey& key, LockMode mode, std::string token,
                  std::string owner, std::chrono::milliseconds ttl);
  // `token` released `key` (the store said true), lazily committed.
  void addReleased(const StoreKey& key, LockMode mode, std::string token,
                   std::string owner, std::chrono::milliseconds ttl);

  // Which leftovers releaseLeftovers looks at.
  enum class Match {
    kExact,       // on exactly the key
    kConflicting  // on the key, an ancestor or a descendant of it
  };
  // Releases by token, under the caller's deadline, every leftover of
  // `owner` (in doubt or recently released) on `key` (as `match` says). True
  // when one of them was found and the store freed it or had already freed
  // it: the caller's next attempt may succeed. Transient store errors
  // propagate (the entry is kept).
  bool releaseLeftovers(std::string_view owner, std::string_view key,
                        Match match = Match::kExact);

  // A request row of `owner` on `key` (acquireLock's wait) that could not
  // be deleted when its wait ended (the store failed or the call had no time
  // left); it expires by itself after `lifetime`. Until then it still holds
  // back newer requests, and its owner's next wait could see it close a
  // false cycle in the wait-for graph. At most kMaxRemembered are kept.
  void addStaleRequest(std::string key, std::string owner,
                       std::chrono::milliseconds lifetime);
  // Deletes every stale request row of `owner` under the caller's deadline;
  // true when at least one was deleted (or found gone). Transient store
  // errors propagate (the rows are kept).
  bool removeStaleRequests(std::string_view owner);

  // In-doubt tokens not yet resolved (tests).
  std::size_t inDoubtCount();

 private:
  struct Entry {
    StoreKey key;
    LockMode mode;
    std::string token;
    std::string owner;
    // After this the lock has expired anyway: nothing left to free.
    std::chrono::steady_clock::time_point forgetAt;
  };

  void run();
  void pruneLocked(std::chrono::steady_clock::time_point now);

  LockStore& store_;
  const std::chrono::milliseconds operationTimeout_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable changed_;
  std::vector<Entry> inDoubt_;
  std::deque<Entry> released_;
  struct StaleRequest {
    std::string key;
    std::string owner;
    std::chrono::steady_clock::time_point forgetAt;
  };
  std::deque<StaleRequest> staleRequests_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dlm::internal
