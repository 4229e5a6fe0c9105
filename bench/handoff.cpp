// The handoff workload: how long the next waiter takes to get a lock after
// its holder releases it, through the public API only.
#include <dlm/lock_store.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "workloads.h"

namespace dlm_bench {

dlm::LockConfiguration handoffConfiguration(const Flags& flags) {
  dlm::LockConfiguration c;
  c.lockTtl = std::chrono::milliseconds(flags.ttlMs);
  c.waitForLock = std::chrono::seconds(30);
  c.sleepBetweenRetries = std::chrono::milliseconds(flags.sleepMs);
  return c;
}

namespace {

class NullListener : public dlm::ReleaseListener {
 public:
  void released(std::string_view) override {}
  void missedReleases() override {}
};

}  // namespace

bool storeDeliversReleases(dlm::LockStore& store) {
  NullListener listener;
  const bool active = store.subscribeReleases(&listener);
  store.unsubscribeReleases(&listener);
  return active;
}

std::string handoffMode(double p50Ms, int sleepMs) {
  // Polling alone: the release lands at a random point of each waiter's
  // sleep, so the first of N waiters wakes after ~sleep/(N+1) at best. A
  // p50 under a tenth of the sleep with a single waiter cannot be polling.
  return p50Ms < sleepMs / 10.0 ? "wake-up (p50 << sleepBetweenRetries)"
                                : "polling (p50 ~ a fraction of "
                                  "sleepBetweenRetries)";
}

HandoffOutcome runHandoff(
    const std::vector<dlm::DistributedLockManager*>& managers,
    const std::string& id, const Flags& flags) {
  const int n = static_cast<int>(managers.size());
  const auto ttl = std::chrono::milliseconds(flags.ttlMs);
  const auto timeout = std::chrono::seconds(30);
  const auto hold = std::chrono::milliseconds(flags.holdMs);

  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t generation = 0;  // acquisitions so far
  bool stop = false;
  std::atomic<std::int64_t> releaseStart{0};
  std::atomic<std::int64_t> windowBegin{INT64_MAX};
  std::atomic<std::int64_t> windowEnd{INT64_MAX};
  HandoffOutcome out;
  std::exception_ptr failure;

  auto body = [&](int j) {
    try {
      dlm::DistributedLockManager& m = *managers[j];
      dlm::Lock lock = m.getLockInstance(id, dlm::LockLevel::XDC);
      for (;;) {
        try {
          m.acquireLock(lock, ttl, timeout);
        } catch (const dlm::DLMException& e) {
          if (e.code() != dlm::ErrorCode::LOCK_UNAVAILABLE) throw;
          std::lock_guard<std::mutex> l(mu);
          ++out.timeouts;
          if (stop) return;
          continue;
        }
        const std::int64_t acquired = nowNs();
        const std::int64_t released = releaseStart.exchange(0);
        std::uint64_t mine;
        bool stopping;
        {
          std::lock_guard<std::mutex> l(mu);
          if (released != 0 && released >= windowBegin.load() &&
              acquired <= windowEnd.load()) {
            out.samples.add((acquired - released) / 1e3);
            ++out.handoffs;
          }
          mine = ++generation;
          stopping = stop;
        }
        cv.notify_all();
        if (!stopping) std::this_thread::sleep_for(hold);
        releaseStart.store(nowNs());
        m.releaseLock(lock);
        if (stopping) return;
        // Queue again only once someone else holds it: a releaser that
        // re-entered at once could win its own first attempt and hide the
        // waiters' latency.
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return generation != mine || stop; });
        if (stop) return;
      }
    } catch (...) {
      std::lock_guard<std::mutex> l(mu);
      if (!failure) failure = std::current_exception();
      stop = true;
      cv.notify_all();
    }
  };

  std::vector<std::thread> threads;
  threads.emplace_back(body, 0);
  {
    // The others start once thread 0 holds the lock, so they all wait.
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return generation > 0 || stop; });
  }
  for (int j = 1; j < n; ++j) threads.emplace_back(body, j);
  const std::int64_t start = nowNs();
  windowBegin = start + static_cast<std::int64_t>(flags.warmup * 1e9);
  windowEnd = windowBegin + static_cast<std::int64_t>(flags.seconds * 1e9);
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (stop) break;
    }
    if (nowNs() >= windowEnd) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard<std::mutex> l(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  out.seconds = (windowEnd - windowBegin) / 1e9;
  return out;
}

}  // namespace dlm_bench
