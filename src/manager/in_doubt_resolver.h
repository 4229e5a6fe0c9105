// Acquisitions the manager no longer tracks but that may still hold a row,
// and how they are freed without waiting out their TTL.
//
// - In doubt: an acquire whose outcome is unknown (the store did not answer,
//   or its reply was lost after the server committed). Its token is kept and
//   released in the background as soon as the store answers again (release
//   is conditional on the token, so this never frees someone else's lock).
// - Request rows to delete: a wait's request row that could not be deleted
//   when the wait ended (stale), or that of a wait that ended with the grant
//   (the stores delete it with the grant; the interface does not promise
//   it, and the caller does not wait for the store call). Deleted in the
//   background, and by the same owner's next wait if it meets one in a
//   cycle, so that it is not reported as a deadlock.
// - Recently released: a release that returned true but committed lazily
//   (PostgreSQL: synchronous_commit off) and may be undone by a server crash.
//   Kept for a while only so that, when the same owner then finds the key
//   blocked by its own owner, the manager can release it again by token
//   instead of reporting a deadlock or waiting out the TTL.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class InDoubtResolver {
 public:
  // How many recent releases are remembered per manager (the oldest go
  // first); a crash undoes at most the last few hundred milliseconds of
  // lazily committed releases.
  static constexpr std::size_t kMaxRemembered = 4096;
  // Pause before the background thread tries again an in-doubt token, or a
  // request row, whose store call failed.
  static constexpr std::chrono::milliseconds kRetryPause{200};

  // `store` must outlive the resolver; each background store call runs under
  // a deadline of `operationTimeout`.
  InDoubtResolver(LockStore& store, std::chrono::milliseconds operationTimeout);
  // Stops the background thread (waits for a store call in progress, which
  // its deadline bounds). Rows not yet deleted are left to expire.
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

  // A request row of `owner` on `key` (acquireLock's wait) to delete in the
  // background, as soon as the store answers: one that could not be deleted
  // when its wait ended (the store failed or the call had no time left), or
  // that of a wait that ended with the grant. It expires by itself after
  // `lifetime` and is forgotten then. Until then it still holds back newer
  // requests, and its owner's next wait could see it close a false cycle in
  // the wait-for graph. At most kMaxRemembered are kept. Starts the
  // background thread on first use.
  void addStaleRequest(std::string key, std::string owner,
                       std::chrono::milliseconds lifetime);
  // Called before `owner` registers a request row for `key`, which replaces
  // the owner's row for the key: forgets the pending deletions of (key,
  // owner), and waits until one the background thread is making returns,
  // so that no deletion of the earlier row deletes the new one. Throws a
  // transient CONNECTION_ERROR (as a store call past its deadline does) if
  // that call has not returned by `deadline`; the caller must not register
  // then.
  void settleRequest(std::string_view key, std::string_view owner,
                     Deadline deadline);
  // How many request rows the background thread has deleted so far.
  std::uint64_t requestsDeleted() const { return requestsDeleted_.load(); }
  // Deletes every stale request row of `owner` under the caller's deadline,
  // after waiting (within it) for the background thread's deletion of one
  // in progress. True when this call deleted one (or found it gone), or
  // when the background thread has deleted any request row since
  // requestsDeleted() answered `deletedBefore`: either may have opened the
  // cycle the caller met. Transient store errors propagate (the rows are
  // kept).
  bool removeStaleRequests(std::string_view owner, std::uint64_t deletedBefore);

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

  struct StaleRequest {
    std::string key;
    std::string owner;
    // After this the row has expired anyway: nothing left to delete.
    std::chrono::steady_clock::time_point forgetAt;
    // Not tried again before this (after a transient failure).
    std::chrono::steady_clock::time_point retryAt{};
  };

  void run();
  // Starts the background thread if it is not running (mutex_ held).
  void startLocked();
  // One round of in-doubt releases, outside the mutex.
  void releaseInDoubt(std::unique_lock<std::mutex>& lock);
  // Deletes `*due` (taken off the list) outside the mutex; puts it back
  // after a transient failure unless settleRequest forgot it meanwhile.
  void deleteStaleRequest(std::unique_lock<std::mutex>& lock,
                          std::deque<StaleRequest>::iterator due);
  // Sleeps until the next entry is due or something changes.
  void waitForWork(std::unique_lock<std::mutex>& lock);
  void pruneLocked(std::chrono::steady_clock::time_point now);

  LockStore& store_;
  const std::chrono::milliseconds operationTimeout_;

  std::mutex mutex_;  // guards everything below but requestsDeleted_
  std::condition_variable changed_;
  std::vector<Entry> inDoubt_;
  // The next in-doubt round, after one that left tokens unresolved.
  std::chrono::steady_clock::time_point inDoubtDueAt_{};
  std::deque<Entry> released_;
  std::deque<StaleRequest> staleRequests_;
  // The row the background thread is deleting (outside the mutex), if any;
  // `deletingForgotten_` once settleRequest forgot it meanwhile.
  std::optional<StaleRequest> deleting_;
  bool deletingForgotten_ = false;
  std::condition_variable deletingEnded_;
  std::atomic<std::uint64_t> requestsDeleted_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dlm::internal
