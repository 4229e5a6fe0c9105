#include "keep_alive.h"

#include <fmt/format.h>

#include <algorithm>

namespace dlm::internal {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

milliseconds renewalPeriod(milliseconds ttl) {
  return std::max(milliseconds(1), ttl / 3);
}

// After a transient failure, try again soon, but often enough to have
// several tries before the lease runs out.
milliseconds retryPeriod(milliseconds ttl) {
  return std::clamp(ttl / 10, milliseconds(1), milliseconds(1000));
}

}  // namespace

KeepAlive::~KeepAlive() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<KeepAliveEntry> KeepAlive::add(StoreKey key, std::string token,
                                               milliseconds ttl,
                                               StoreTime expiresAt,
                                               std::string lockName,
                                               LostCallback onLost) {
  auto entry = std::make_shared<KeepAliveEntry>();
  entry->key = std::move(key);
  entry->token = std::move(token);
  entry->ttl = ttl;
  entry->lockName = std::move(lockName);
  entry->onLost = std::move(onLost);
  entry->expiresAt = expiresAt;
  const SteadyTime now = std::chrono::steady_clock::now();
  // The lease started slightly before now as the store saw it; counting
  // from now would only overestimate how long it has left.
  entry->nextRenewal = now + renewalPeriod(ttl);
  entry->deadline = now + ttl;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(entry);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
  return entry;
}

void KeepAlive::remove(const std::shared_ptr<KeepAliveEntry>& entry) {
  {
    // Waits for a renewal of this entry in progress (it holds the mutex).
    std::lock_guard<std::mutex> lock(entry->mutex);
    entry->cancelled = true;
  }
  // Waits for an onLost callback in progress.
  { std::lock_guard<std::mutex> dispatch(dispatchMutex_); }
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(std::remove(entries_.begin(), entries_.end(), entry),
                 entries_.end());
}

bool KeepAlive::renew(KeepAliveEntry& e) {
  std::lock_guard<std::mutex> lock(e.mutex);
  if (e.cancelled || e.lost) return false;
  const SteadyTime started = std::chrono::steady_clock::now();
  try {
    // No manager-level retries here: a failed renewal is simply tried again
    // at the next retry period while the lease lasts.
    if (auto expires = store_.extend(e.key.key, e.token, e.ttl)) {
      e.expiresAt = *expires;
      e.deadline = started + e.ttl;
      e.nextRenewal = started + renewalPeriod(e.ttl);
      return false;
    }
    e.lost = true;
  } catch (const DLMException& ex) {
    const SteadyTime retryAt =
        std::chrono::steady_clock::now() + retryPeriod(e.ttl);
    if (ex.transient() && retryAt < e.deadline) {
      e.nextRenewal = retryAt;
      return false;
    }
    e.lost = true;
  }
  return true;
}

void KeepAlive::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    SteadyTime wake = SteadyTime::max();
    std::vector<std::shared_ptr<KeepAliveEntry>> due;
    const SteadyTime now = std::chrono::steady_clock::now();
    for (const auto& e : entries_) {
      std::lock_guard<std::mutex> entryLock(e->mutex);
      if (e->nextRenewal <= now) {
        due.push_back(e);
      } else {
        wake = std::min(wake, e->nextRenewal);
      }
    }
    if (due.empty()) {
      if (wake == SteadyTime::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, wake);
      }
      continue;
    }
    // Store calls without the list lock: add/remove stay quick.
    lock.unlock();
    for (const auto& e : due) {
      if (!renew(*e)) continue;
      std::lock_guard<std::mutex> dispatch(dispatchMutex_);
      {
        std::lock_guard<std::mutex> entryLock(e->mutex);
        if (e->cancelled) continue;
      }
      if (e->onLost) {
        const DLMException why(
            ErrorCode::LOCK_NOT_HELD,
            fmt::format("{} was lost: its lease could not be renewed",
                        e->lockName));
        try {
          e->onLost(why);
        } catch (...) {
          // A callback's exception has nowhere to go on this thread.
        }
      }
    }
    lock.lock();
    // Lost entries need no more renewals.
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [](const auto& e) {
                                    std::lock_guard<std::mutex> l(e->mutex);
                                    return e->lost;
                                  }),
                   entries_.end());
  }
}

}  // namespace dlm::internal
