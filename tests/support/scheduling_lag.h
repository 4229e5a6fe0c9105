// How late this machine wakes a sleeping thread, measured while a test runs,
// so that a time bound can carry the scheduling slack the machine needs
// today instead of assuming a free CPU (a CI runner rarely is idle).
//
// A bound built with it is `configured time + slack(hops)`: the time the
// library is configured to take, plus, for each thread or process that has
// to be woken on the path being timed, the longest wake-up delay seen, and
// never less than half a second (a starved server process wakes late too,
// and this process may not have seen it: a handoff through PgBouncer took
// 264 ms against 220 configured while this process saw 5 ms of lateness).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace dlm::test {

class SchedulingLag {
 public:
  // Starts measuring: a thread sleeps `tick` again and again and records how
  // much later than asked it woke.
  explicit SchedulingLag(
      std::chrono::milliseconds tick = std::chrono::milliseconds(5))
      : tick_(tick), thread_([this] { run(); }) {}
  ~SchedulingLag() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  SchedulingLag(const SchedulingLag&) = delete;
  SchedulingLag& operator=(const SchedulingLag&) = delete;

  // The longest wake-up delay seen so far, at least 1 ms.
  std::chrono::milliseconds lateness() const {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::milliseconds(maxLateMs_.load()));
  }
  // The slack for a path on which `hops` sleeping threads or processes must
  // be woken one after the other, and at least kMinSlack: the lateness this
  // process sees is not all of it (the server's processes and the pooler's
  // are scheduled too, and this test may have run between their delays).
  std::chrono::milliseconds slack(int hops) const {
    return std::max(kMinSlack, hops * lateness());
  }
  static constexpr std::chrono::milliseconds kMinSlack{500};

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      const auto asked = std::chrono::steady_clock::now() + tick_;
      // A plain timed sleep (the stop flag only ends it early).
      wake_.wait_until(lock, asked, [this] { return stop_; });
      if (stop_) break;
      const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - asked)
                            .count();
      if (late > maxLateMs_.load()) maxLateMs_.store(late);
    }
  }

  const std::chrono::milliseconds tick_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<long long> maxLateMs_{0};
  std::thread thread_;
};

}  // namespace dlm::test
