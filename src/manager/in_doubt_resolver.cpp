#include "manager/in_doubt_resolver.h"

#include <algorithm>
#include <utility>

#include "dlm/deadline.h"
#include "dlm/error.h"
#include "manager/release_wait_hub.h"

namespace dlm::internal {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

SteadyTime forgetAfter(std::chrono::milliseconds ttl) {
  return deadlineAfter(ttl);
}

}  // namespace

InDoubtResolver::InDoubtResolver(LockStore& store,
                                 std::chrono::milliseconds operationTimeout)
    : store_(store), operationTimeout_(operationTimeout) {}

InDoubtResolver::~InDoubtResolver() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void InDoubtResolver::addInDoubt(const StoreKey& key, LockMode mode,
                                 std::string token, std::string owner,
                                 std::chrono::milliseconds ttl) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    inDoubt_.push_back(
        Entry{key, mode, std::move(token), std::move(owner), forgetAfter(ttl)});
    startLocked();
  }
  changed_.notify_all();
}

void InDoubtResolver::startLocked() {
  if (!stop_ && !thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void InDoubtResolver::addReleased(const StoreKey& key, LockMode mode,
                                  std::string token, std::string owner,
                                  std::chrono::milliseconds ttl) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (released_.size() >= kMaxRemembered) released_.pop_front();
  released_.push_back(
      Entry{key, mode, std::move(token), std::move(owner), forgetAfter(ttl)});
}

void InDoubtResolver::pruneLocked(SteadyTime now) {
  auto expired = [now](const Entry& e) { return e.forgetAt <= now; };
  inDoubt_.erase(std::remove_if(inDoubt_.begin(), inDoubt_.end(), expired),
                 inDoubt_.end());
  // Oldest first, so only the front is looked at: this runs on refused
  // attempts, and an expired entry further back is harmless (its release
  // would answer false) until the ring pushes it out.
  while (!released_.empty() && expired(released_.front())) {
    released_.pop_front();
  }
  staleRequests_.erase(
      std::remove_if(
          staleRequests_.begin(), staleRequests_.end(),
          [now](const StaleRequest& r) { return r.forgetAt <= now; }),
      staleRequests_.end());
}

void InDoubtResolver::addStaleRequest(std::string key, std::string owner,
                                      std::chrono::milliseconds lifetime) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    if (staleRequests_.size() >= kMaxRemembered) staleRequests_.pop_front();
    staleRequests_.push_back({std::move(key), std::move(owner),
                              std::chrono::steady_clock::now() + lifetime});
    startLocked();
  }
  changed_.notify_all();
}

void InDoubtResolver::settleRequest(std::string_view key,
                                    std::string_view owner, Deadline deadline) {
  const auto same = [&](const StaleRequest& r) {
    return r.key == key && r.owner == owner;
  };
  std::unique_lock<std::mutex> lock(mutex_);
  staleRequests_.erase(
      std::remove_if(staleRequests_.begin(), staleRequests_.end(), same),
      staleRequests_.end());
  if (!deleting_ || !same(*deleting_)) return;
  // Not to be tried again, whatever its outcome.
  deletingForgotten_ = true;
  const bool ended = deletingEnded_.wait_until(
      lock, deadline, [&] { return !deleting_ || !same(*deleting_); });
  if (!ended) {
    throw DLMException(ErrorCode::CONNECTION_ERROR,
                       "the store has not yet answered the deletion of the "
                       "earlier request row of this owner for " +
                           std::string(key),
                       true);
  }
}

bool InDoubtResolver::removeStaleRequests(std::string_view owner,
                                          std::uint64_t deletedBefore) {
  std::vector<StaleRequest> mine;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A deletion in progress counts once it returns (a failed one is back
    // on the list by then). Past the deadline, what is known is answered.
    deletingEnded_.wait_until(lock, deadlineOr(operationTimeout_), [&] {
      return !deleting_ || deleting_->owner != owner;
    });
    pruneLocked(std::chrono::steady_clock::now());
    for (auto it = staleRequests_.begin(); it != staleRequests_.end();) {
      if (it->owner == owner) {
        mine.push_back(std::move(*it));
        it = staleRequests_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Outside the mutex: store calls. What fails goes back on the list.
  for (std::size_t i = 0; i < mine.size(); ++i) {
    try {
      store_.unregisterWait(mine[i].key, mine[i].owner);
    } catch (...) {
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t j = i; j < mine.size(); ++j) {
          staleRequests_.push_back(std::move(mine[j]));
        }
      }
      changed_.notify_all();
      throw;
    }
  }
  return !mine.empty() || requestsDeleted_.load() != deletedBefore;
}

bool InDoubtResolver::releaseLeftovers(std::string_view owner,
                                       std::string_view key, Match match) {
  const auto matches_ = [&](const Entry& e) {
    return match == Match::kExact ? e.key.key == key : mayUnblock(e.key, key);
  };
  std::vector<Entry> matches;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pruneLocked(std::chrono::steady_clock::now());
    auto take = [&](auto& from) {
      for (auto it = from.begin(); it != from.end();) {
        if (it->owner == owner && matches_(*it)) {
          matches.push_back(std::move(*it));
          it = from.erase(it);
        } else {
          ++it;
        }
      }
    };
    take(inDoubt_);
    take(released_);
  }
  bool freed = false;
  for (std::size_t i = 0; i < matches.size(); ++i) {
    try {
      freed =
          store_.release(matches[i].key, matches[i].token, matches[i].mode) ||
          freed;
    } catch (const DLMException&) {
      // Unresolved: the background thread keeps trying.
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t j = i; j < matches.size(); ++j) {
        inDoubt_.push_back(std::move(matches[j]));
      }
      startLocked();
      changed_.notify_all();
      throw;
    }
  }
  return freed;
}

std::size_t InDoubtResolver::inDoubtCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return inDoubt_.size();
}

void InDoubtResolver::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    const SteadyTime now = std::chrono::steady_clock::now();
    pruneLocked(now);
    if (!inDoubt_.empty() && inDoubtDueAt_ <= now) {
      releaseInDoubt(lock);
      continue;
    }
    const auto due =
        std::find_if(staleRequests_.begin(), staleRequests_.end(),
                     [now](const StaleRequest& r) { return r.retryAt <= now; });
    if (due != staleRequests_.end()) {
      deleteStaleRequest(lock, due);
      continue;
    }
    waitForWork(lock);
  }
}

void InDoubtResolver::releaseInDoubt(std::unique_lock<std::mutex>& lock) {
  std::vector<Entry> round;
  round.swap(inDoubt_);
  lock.unlock();
  std::vector<Entry> unresolved;
  for (auto& e : round) {
    try {
      const DeadlineScope scope(deadlineAfter(operationTimeout_));
      // Either answer settles it: true freed it (or it was never taken),
      // false means someone else holds the key now.
      store_.release(e.key, e.token, e.mode);
    } catch (const DLMException& ex) {
      // A closed store or a bug will not get better by trying again.
      if (ex.transient()) unresolved.push_back(std::move(e));
    }
  }
  lock.lock();
  if (unresolved.empty()) return;
  for (auto& e : unresolved) inDoubt_.push_back(std::move(e));
  inDoubtDueAt_ = std::chrono::steady_clock::now() + kRetryPause;
}

void InDoubtResolver::deleteStaleRequest(
    std::unique_lock<std::mutex>& lock,
    std::deque<StaleRequest>::iterator due) {
  deleting_ = std::move(*due);
  deletingForgotten_ = false;
  staleRequests_.erase(due);
  lock.unlock();
  bool deleted = false;
  bool retry = false;
  try {
    const DeadlineScope scope(deadlineAfter(operationTimeout_));
    store_.unregisterWait(deleting_->key, deleting_->owner);
    deleted = true;
  } catch (const DLMException& ex) {
    // As for in-doubt tokens: only a transient failure is tried again.
    retry = ex.transient();
  } catch (...) {
    // Not the store's protocol: left to expire.
  }
  lock.lock();
  if (deleted) ++requestsDeleted_;
  if (retry && !deletingForgotten_) {
    deleting_->retryAt = std::chrono::steady_clock::now() + kRetryPause;
    staleRequests_.push_back(std::move(*deleting_));
  }
  deleting_.reset();
  deletingEnded_.notify_all();
}

void InDoubtResolver::waitForWork(std::unique_lock<std::mutex>& lock) {
  SteadyTime next = SteadyTime::max();
  if (!inDoubt_.empty()) next = inDoubtDueAt_;
  for (const StaleRequest& r : staleRequests_) next = std::min(next, r.retryAt);
  if (next == SteadyTime::max()) {
    changed_.wait(lock);
  } else {
    changed_.wait_until(lock, next);
  }
}

}  // namespace dlm::internal
