// A manager's threads in tryAcquireLock / releaseLock cycles on keys of
// their own and on shared ones, through a store whose single calls are
// slowed so that concurrent calls queue and go to the store as batch calls
// ("Set-based when busy"). Shared by the unit tests (fake store) and the
// conformance suite (SQLite, PostgreSQL, PgBouncer): the same run, judged by
// the hold-log oracle (no overlap, fencing tokens never back).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "contender.h"
#include "dlm/dlm.h"
#include "dlm/lock_store_admin.h"
#include "dlm/lock_store_wrapper.h"
#include "hold_log.h"

namespace dlm::test {

// Single tryAcquire, release and extend take `delay` longer (the batch calls
// do not), so calls arriving meanwhile queue behind them; counts single and
// batch calls. Batch calls go to the wrapped store as batches, so the
// store's own batch implementation is what runs.
class SlowSinglesStore final : public LockStoreWrapper {
 public:
  SlowSinglesStore(std::shared_ptr<LockStore> target,
                   std::chrono::milliseconds delay)
      : LockStoreWrapper(std::move(target)), delay_(delay) {}

  std::atomic<int> singleAcquires{0};
  std::atomic<int> singleReleases{0};
  std::atomic<int> singleExtends{0};
  std::atomic<int> acquireBatches{0};
  std::atomic<int> releaseBatches{0};
  std::atomic<int> extendBatches{0};
  std::atomic<int> acquireAllCalls{0};
  // Batch calls that carried more than one request.
  std::atomic<int> multiAcquireBatches{0};
  std::atomic<int> multiReleaseBatches{0};
  std::atomic<int> multiExtendBatches{0};
  // Locks carried by batch calls, and the most in one.
  std::atomic<long> batchedRequests{0};
  std::atomic<std::size_t> largestBatch{0};

  int batchCalls() const {
    return acquireBatches + releaseBatches + extendBatches + acquireAllCalls;
  }

  AcquireResult tryAcquire(const AcquireRequest& r) override {
    ++singleAcquires;
    std::this_thread::sleep_for(delay_);
    return LockStoreWrapper::tryAcquire(r);
  }
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    ++singleReleases;
    std::this_thread::sleep_for(delay_);
    return LockStoreWrapper::release(key, token, mode);
  }
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode) override {
    ++singleExtends;
    std::this_thread::sleep_for(delay_);
    return LockStoreWrapper::extend(key, token, ttl, mode);
  }
  std::vector<AcquireOutcome> tryAcquireEach(
      const std::vector<AcquireRequest>& requests) override {
    record(acquireBatches, multiAcquireBatches, requests.size());
    return LockStoreWrapper::tryAcquireEach(requests);
  }
  std::vector<ReleaseOutcome> releaseEach(
      const std::vector<ReleaseRequest>& requests) override {
    record(releaseBatches, multiReleaseBatches, requests.size());
    return LockStoreWrapper::releaseEach(requests);
  }
  std::vector<ExtendOutcome> extendEach(
      const std::vector<ExtendRequest>& requests) override {
    record(extendBatches, multiExtendBatches, requests.size());
    return LockStoreWrapper::extendEach(requests);
  }
  AcquireAllResult tryAcquireAll(
      const std::vector<AcquireRequest>& requests) override {
    ++acquireAllCalls;
    return LockStoreWrapper::tryAcquireAll(requests);
  }

 private:
  void record(std::atomic<int>& calls, std::atomic<int>& multi,
              std::size_t n) {
    ++calls;
    if (n > 1) ++multi;
    batchedRequests += static_cast<long>(n);
    std::size_t seen = largestBatch.load();
    while (n > seen && !largestBatch.compare_exchange_weak(seen, n)) {
    }
  }

  const std::chrono::milliseconds delay_;
};

// The configuration of the batching runs (batchStoreCalls as given): long
// leases no hold comes near (an expiry would allow a legitimate takeover,
// which the oracle would call an overlap) and budgets a busy machine cannot
// use up.
inline LockConfiguration batchingRunConfiguration(bool batch) {
  LockConfiguration c;
  c.batchStoreCalls = batch;
  c.lockTtl = std::chrono::seconds(60);
  c.waitForLock = std::chrono::seconds(1);
  c.sleepBetweenRetries = std::chrono::milliseconds(5);
  c.storeRetries = 8;
  c.storeRetryBackoff = std::chrono::milliseconds(5);
  c.operationTimeout = std::chrono::seconds(30);
  return c;
}

// Keys every thread of the run contends for (a parent and its children,
// and an unrelated one); each thread also has one of its own ("own<t>").
inline std::vector<oracle::WeightedKey> batchingSharedKeys() {
  return {{"shared", 1}, {"shared.a", 2}, {"shared.b", 2}, {"common", 2}};
}

struct BatchingRunResult {
  std::vector<oracle::ContendResult> threads;
  long attempts = 0;
};

// `threads` threads on `manager` in tryAcquireLock / hold / releaseLock
// cycles until `enough()` holds after at least `minAttempts` attempts in
// all (asked before every attempt), or `maxAttempts` in all, or 120 s (a
// stuck run only).
template <typename Enough>
BatchingRunResult runBatchedCycles(DistributedLockManager& manager,
                                   int threads, long minAttempts,
                                   long maxAttempts, Enough enough) {
  BatchingRunResult run;
  run.threads.resize(static_cast<std::size_t>(threads));
  std::atomic<long> attempts{0};
  std::atomic<bool> done{false};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::promise<void> start;
  std::shared_future<void> go = start.get_future().share();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t, go] {
      oracle::ContendOptions o;
      o.keys = batchingSharedKeys();
      o.keys.push_back({"own" + std::to_string(t), 4});
      o.worker = t;
      o.deadline = deadline;
      o.stopRequested = [&] {
        if (done) return true;
        const long n = ++attempts;
        if (n > maxAttempts || (n > minAttempts && enough())) done = true;
        return done.load();
      };
      o.holdMin = std::chrono::microseconds(0);
      o.holdMax = std::chrono::microseconds(1000);
      o.pauseMax = std::chrono::microseconds(500);
      o.ttl = std::chrono::seconds(60);
      o.tryPercent = 100;
      o.seed = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(t + 1);
      go.wait();
      run.threads[static_cast<std::size_t>(t)] = oracle::contend(manager, o);
    });
  }
  start.set_value();
  for (auto& th : pool) th.join();
  run.attempts = attempts.load();
  return run;
}

// The run's guarantees: no thread failed, no release returned false, no two
// conflicting holds overlapped, no fencing token went back, both the
// threads' own keys and the shared ones were held, and nothing of the
// manager's client is held afterwards.
inline void expectBatchedCyclesSafe(const BatchingRunResult& run,
                                    DistributedLockManager& manager,
                                    const std::string& clientPrefix) {
  std::vector<oracle::Hold> holds;
  for (const auto& r : run.threads) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.failedReleases, 0);
    holds.insert(holds.end(), r.holds.begin(), r.holds.end());
  }
  const oracle::HoldReport report = oracle::checkHolds(holds, '.');
  std::string problems;
  for (const auto& line : oracle::describeProblems(report)) {
    problems += line + "\n";
  }
  EXPECT_EQ(report.overlapCount, 0) << problems;
  EXPECT_TRUE(report.fencingViolations.empty()) << problems;
  EXPECT_EQ(report.earlyAcquisitionCount, 0) << problems;
  EXPECT_TRUE(report.failedReleases.empty()) << problems;
  std::int64_t ownHolds = 0, sharedHolds = 0;
  for (const auto& k : report.keys) {
    (k.key.rfind("own", 0) == 0 ? ownHolds : sharedHolds) += k.holds;
  }
  EXPECT_GT(ownHolds, 0) << "no thread held a key of its own";
  EXPECT_GT(sharedHolds, 0) << "no thread held a shared key";
  const auto held = adminOf(manager.store()).listHeld(clientPrefix);
  EXPECT_TRUE(held.empty()) << held.size() << " locks still held, first "
                            << (held.empty() ? "" : held.front().key);
}

// `threads` threads of `manager` each hold a key of their own and extend it
// again and again at once, until `enough()` holds (asked after each round of
// every thread, at least 3 rounds, at most 200). Every extension keeps the
// lock and never moves its expiry back; each lock is released at the end.
// The number of rounds.
template <typename Enough>
int runBatchedExtensions(DistributedLockManager& manager, int threads,
                         Enough enough) {
  std::vector<Lock> locks;
  for (int t = 0; t < threads; ++t) {
    locks.push_back(
        manager.getLockInstance("ext" + std::to_string(t), LockLevel::DC));
    manager.tryAcquireLock(locks.back(), std::chrono::seconds(60));
  }
  std::atomic<int> failures{0};
  int rounds = 0;
  while (rounds < 200 && (rounds < 3 || !enough())) {
    ++rounds;
    std::promise<void> start;
    std::shared_future<void> go = start.get_future().share();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t, go] {
        Lock& lock = locks[static_cast<std::size_t>(t)];
        const StoreTime before = lock.expiresAt();
        go.wait();
        try {
          manager.extendLock(lock, std::chrono::seconds(60));
          if (!lock.isAcquired() || lock.expiresAt() < before) ++failures;
        } catch (const DLMException& e) {
          ADD_FAILURE() << "extendLock: " << e.what();
          ++failures;
        }
      });
    }
    start.set_value();
    for (auto& th : pool) th.join();
  }
  EXPECT_EQ(failures.load(), 0);
  for (Lock& lock : locks) EXPECT_TRUE(manager.releaseLock(lock));
  return rounds;
}

}  // namespace dlm::test
