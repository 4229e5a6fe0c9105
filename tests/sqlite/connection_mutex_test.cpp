// The SQLite store's connection goes to the threads of a process in the order
// they asked for it: a thread that cycles (release, ask again at once) cannot
// keep the others out until their deadlines.
#include "sqlite/connection_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"

namespace dlm::sqlite_test {
namespace {

using internal::sqlite::ConnectionMutex;
using std::chrono::milliseconds;

// Generous: the waits below end by hand-over, not by these bounds.
constexpr milliseconds kBusyTimeout{60000};

// Waits (bounded) until `n` threads are about to ask: each is counted by
// the test just before it asks.
void waitUntilAsked(const std::atomic<int>& asked, int n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (asked.load() < n && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  // Asked is counted before lock(): give the last one time to queue.
  std::this_thread::sleep_for(milliseconds(50));
}

// Waits (bounded) until `n` threads are queued behind the holder, as the
// mutex itself counts them: their arrival order is then known, however
// slowly a busy machine schedules them.
void waitUntilQueued(ConnectionMutex& mutex, std::size_t n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (mutex.waiting() < n && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_GE(mutex.waiting(), n) << "the waiters did not queue in 30 s";
}

TEST(ConnectionMutex, ACyclingThreadQueuesBehindTheThreadsAlreadyWaiting) {
  ConnectionMutex mutex("fifo.sqlite", kBusyTimeout);
  std::mutex orderMutex;
  std::vector<int> order;
  std::optional<ConnectionMutex::Guard> held(mutex.lock("holding"));

  std::vector<std::thread> waiters;
  for (int i = 1; i <= 3; ++i) {
    waiters.emplace_back([&, i] {
      const ConnectionMutex::Guard guard = mutex.lock("waiting");
      const std::lock_guard<std::mutex> lock(orderMutex);
      order.push_back(i);
    });
    // One at a time, so that their arrival order is known.
    waitUntilQueued(mutex, static_cast<std::size_t>(i));
  }
  // The holder lets go and asks again at once, as a cycling worker does.
  held.reset();
  {
    const ConnectionMutex::Guard again = mutex.lock("cycling");
    const std::lock_guard<std::mutex> lock(orderMutex);
    order.push_back(0);
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 0}))
      << "served in arrival order, the cycling thread last";
}

TEST(ConnectionMutex, AWaiterThatGaveUpDoesNotHoldUpTheOnesBehindIt) {
  ConnectionMutex mutex("fifo.sqlite", kBusyTimeout);
  std::atomic<int> asked{0};
  std::optional<ConnectionMutex::Guard> held(mutex.lock("holding"));

  std::atomic<bool> gaveUp{false};
  std::thread impatient([&] {
    ++asked;
    const DeadlineScope scope(deadlineAfter(milliseconds(100)));
    try {
      const ConnectionMutex::Guard guard = mutex.lock("impatient");
    } catch (const DLMException& e) {
      gaveUp = e.code() == ErrorCode::RETRIES_EXHAUSTED;
    }
  });
  waitUntilAsked(asked, 1);
  std::atomic<bool> served{false};
  std::thread patient([&] {
    ++asked;
    const ConnectionMutex::Guard guard = mutex.lock("patient");
    served = true;
  });
  waitUntilAsked(asked, 2);
  impatient.join();
  EXPECT_TRUE(gaveUp) << "its deadline ended its wait";
  held.reset();
  patient.join();
  EXPECT_TRUE(served);
  // And the connection is free again afterwards.
  const DeadlineScope scope(deadlineAfter(milliseconds(0)));
  EXPECT_NO_THROW(mutex.lock("after"));
}

}  // namespace
}  // namespace dlm::sqlite_test
