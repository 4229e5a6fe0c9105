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
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
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
}

void InDoubtResolver::addStaleRequest(std::string key, std::string owner,
                                      std::chrono::milliseconds lifetime) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (staleRequests_.size() >= kMaxRemembered) staleRequests_.pop_front();
  staleRequests_.push_back({std::move(key), std::move(owner),
                            std::chrono::steady_clock::now() + lifetime});
}

bool InDoubtResolver::removeStaleRequests(std::string_view owner) {
  std::vector<StaleRequest> mine;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = staleRequests_.begin(); it != staleRequests_.end();) {
      if (it->forgetAt <= now) {
        it = staleRequests_.erase(it);
      } else if (it->owner == owner) {
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
      const std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t j = i; j < mine.size(); ++j) {
        staleRequests_.push_back(std::move(mine[j]));
      }
      throw;
    }
  }
  return !mine.empty();
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
      if (!stop_ && !thread_.joinable()) {
        thread_ = std::thread([this] { run(); });
      }
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
    pruneLocked(std::chrono::steady_clock::now());
    if (inDoubt_.empty()) {
      changed_.wait(lock);
      continue;
    }
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
    for (auto& e : unresolved) inDoubt_.push_back(std::move(e));
    if (!inDoubt_.empty()) {
      changed_.wait_for(lock, kRetryPause, [this] { return stop_; });
    }
  }
}

}  // namespace dlm::internal
