// CallBatcher (src/batching/call_batcher.h): a lone call goes alone at once,
// calls made while a batch is at the store go together as the next one, a
// call from inside a running batch goes alone, a queued call past its
// deadline leaves the queue unsent (and the calls behind it still go), the
// queue goes first come, first served, in batches of at most maxBatch, at
// most maxInFlight at once, each call answered with its own outcome.
#include "batching/call_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"

namespace dlm::internal {
namespace {

using std::chrono::milliseconds;
using Batcher = CallBatcher<int, int>;

// Records each batch it is given; a batch of a request < 0 waits at the
// gate until opened.
class BatchRecorder {
 public:
  std::vector<int> run(const std::vector<int>& requests) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      batches_.push_back(requests);
      changed_.notify_all();
      if (requests.front() < 0) {
        changed_.wait(lock, [&] { return open_; });
      }
    }
    std::vector<int> out;
    for (const int r : requests) out.push_back(r * 10);
    return out;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  std::vector<std::vector<int>> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  bool waitForBatches(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(30),
                             [&] { return batches_.size() >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::vector<int>> batches_;
  bool open_ = false;
};

TEST(CallBatcher, ALoneCallGoesAloneAtOnce) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); },
                  64, 1);
  EXPECT_EQ(batcher.call(7, milliseconds(5000)), 70);
  ASSERT_EQ(recorder.batches().size(), 1u);
  EXPECT_EQ(recorder.batches()[0], std::vector<int>{7});
}

TEST(CallBatcher, CallsMadeWhileABatchIsOutGoTogetherAsTheNext) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); },
                  64, 1);
  std::thread first(
      [&] { EXPECT_EQ(batcher.call(-1, milliseconds(30000)), -10); });
  ASSERT_TRUE(recorder.waitForBatches(1));
  std::vector<std::thread> others;
  for (int i = 1; i <= 3; ++i) {
    others.emplace_back(
        [&, i] { EXPECT_EQ(batcher.call(i, milliseconds(30000)), i * 10); });
  }
  // All three queued behind the batch at the store.
  for (int spins = 0; batcher.pending() < 4 && spins < 30000; ++spins) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(batcher.pending(), 4u);
  recorder.open();
  first.join();
  for (auto& t : others) t.join();
  const auto batches = recorder.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].size(), 3u);
}

TEST(CallBatcher, ACallFromInsideARunningBatchGoesAlone) {
  std::atomic<int> inner{0};
  Batcher* self = nullptr;
  Batcher batcher(
      [&](const std::vector<int>& r) {
        // As an event handler run by the store call would: a call of the
        // same kind, on the batch's own thread.
        if (r.front() == 1) inner = self->call(2, milliseconds(2000));
        std::vector<int> out;
        for (const int x : r) out.push_back(x * 10);
        return out;
      },
      64, 1);
  self = &batcher;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(batcher.call(1, milliseconds(2000)), 10);
  EXPECT_EQ(inner.load(), 20);
  // Queued behind itself it would have waited out its 2 s deadline.
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2000));
}

TEST(CallBatcher, AQueuedCallPastItsDeadlineLeavesUnsent) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); },
                  64, 1);
  std::thread first([&] { batcher.call(-1, milliseconds(30000)); });
  ASSERT_TRUE(recorder.waitForBatches(1));
  try {
    batcher.call(5, milliseconds(50));
    ADD_FAILURE() << "a queued call outlived its deadline";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR);
    EXPECT_TRUE(e.transient());
  }
  recorder.open();
  first.join();
  // Only the first batch ever reached the store.
  ASSERT_EQ(recorder.batches().size(), 1u);
  EXPECT_EQ(recorder.batches()[0], std::vector<int>{-1});
}

// Starts a thread calling `batcher` with `request` and waits until the
// call is queued or at the store (pending() grew), so calls started one
// after another queue in that order.
std::thread queuedCall(Batcher& batcher, int request, milliseconds budget,
                       std::atomic<int>& answered) {
  const std::size_t before = batcher.pending();
  std::thread t([&batcher, request, budget, &answered] {
    if (batcher.call(request, budget) == request * 10) ++answered;
  });
  for (int spins = 0; batcher.pending() <= before && spins < 30000; ++spins) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  return t;
}

TEST(CallBatcher, QueuedCallsGoFirstComeFirstServedInBatchesOfAtMostMaxBatch) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); }, 2,
                  1);
  std::atomic<int> answered{0};
  std::vector<std::thread> calls;
  calls.push_back(queuedCall(batcher, -1, milliseconds(30000), answered));
  ASSERT_TRUE(recorder.waitForBatches(1));
  for (int i = 1; i <= 5; ++i) {
    calls.push_back(queuedCall(batcher, i, milliseconds(30000), answered));
  }
  EXPECT_EQ(batcher.pending(), 6u);
  recorder.open();
  for (auto& t : calls) t.join();
  // Each batch that came back handed the turn to the next queued call.
  EXPECT_EQ(answered.load(), 6);
  const std::vector<std::vector<int>> expected = {{-1}, {1, 2}, {3, 4}, {5}};
  EXPECT_EQ(recorder.batches(), expected);
}

TEST(CallBatcher,
     ACallLeavingTheQueueAtItsDeadlineDoesNotHoldUpTheCallsBehindIt) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); },
                  64, 1);
  std::atomic<int> answered{0};
  std::thread first = queuedCall(batcher, -1, milliseconds(30000), answered);
  ASSERT_TRUE(recorder.waitForBatches(1));
  std::thread early(
      [&] { EXPECT_THROW(batcher.call(5, milliseconds(50)), DLMException); });
  for (int spins = 0; batcher.pending() < 2 && spins < 30000; ++spins) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  std::thread behind = queuedCall(batcher, 6, milliseconds(30000), answered);
  early.join();
  recorder.open();
  first.join();
  behind.join();
  EXPECT_EQ(answered.load(), 2);
  const std::vector<std::vector<int>> expected = {{-1}, {6}};
  EXPECT_EQ(recorder.batches(), expected);
}

TEST(CallBatcher, UpToMaxInFlightBatchesAreAtTheStoreAtOnce) {
  BatchRecorder recorder;
  Batcher batcher([&](const std::vector<int>& r) { return recorder.run(r); },
                  64, 2);
  std::atomic<int> answered{0};
  std::vector<std::thread> calls;
  calls.push_back(queuedCall(batcher, -1, milliseconds(30000), answered));
  ASSERT_TRUE(recorder.waitForBatches(1));
  // A second batch goes while the first is out.
  calls.push_back(queuedCall(batcher, -2, milliseconds(30000), answered));
  ASSERT_TRUE(recorder.waitForBatches(2));
  calls.push_back(queuedCall(batcher, 3, milliseconds(30000), answered));
  calls.push_back(queuedCall(batcher, 4, milliseconds(30000), answered));
  EXPECT_EQ(recorder.batches().size(), 2u);
  recorder.open();
  for (auto& t : calls) t.join();
  EXPECT_EQ(answered.load(), 4);
  const auto batches = recorder.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2], (std::vector<int>{3, 4}));
}

TEST(CallBatcher, ManyThreadsEachGetTheirOwnAnswerWithinTheLimits) {
  constexpr int kThreads = 16;
  constexpr int kCalls = 300;
  constexpr std::size_t kMaxBatch = 4;
  constexpr int kMaxInFlight = 2;
  std::atomic<int> atStore{0};
  std::atomic<int> mostAtStore{0};
  std::atomic<std::size_t> largest{0};
  Batcher batcher(
      [&](const std::vector<int>& r) {
        const int now = ++atStore;
        int most = mostAtStore.load();
        while (now > most && !mostAtStore.compare_exchange_weak(most, now)) {
        }
        std::size_t size = largest.load();
        while (r.size() > size &&
               !largest.compare_exchange_weak(size, r.size())) {
        }
        std::this_thread::yield();
        std::vector<int> out;
        for (const int x : r) out.push_back(x * 10);
        --atStore;
        return out;
      },
      kMaxBatch, kMaxInFlight);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const int request = t * kCalls + i;
        if (batcher.call(request, milliseconds(30000)) != request * 10) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(mostAtStore.load(), kMaxInFlight);
  EXPECT_LE(largest.load(), kMaxBatch);
  EXPECT_EQ(batcher.pending(), 0u);
}

}  // namespace
}  // namespace dlm::internal
