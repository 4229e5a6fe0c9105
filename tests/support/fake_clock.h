// A manager Clock whose sleeps return at once and advance virtual time; it
// records every sleep so tests can check the wait loop's schedule.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "dlm/clock.h"

namespace dlm::test {

class FakeClock final : public Clock {
 public:
  TimePoint now() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }
  void sleepFor(std::chrono::milliseconds d) override {
    std::function<void(std::chrono::milliseconds)> hook;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sleeps_.push_back(d);
      now_ += d;
      hook = onSleep_;
    }
    if (hook) hook(d);
  }
  std::vector<std::chrono::milliseconds> sleeps() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sleeps_;
  }
  // Called after each sleep (e.g. to advance a FakeStore's clock too).
  void onSleep(std::function<void(std::chrono::milliseconds)> hook) {
    std::lock_guard<std::mutex> lock(mutex_);
    onSleep_ = std::move(hook);
  }

 private:
  std::mutex mutex_;
  TimePoint now_{};
  std::vector<std::chrono::milliseconds> sleeps_;
  std::function<void(std::chrono::milliseconds)> onSleep_;
};

}  // namespace dlm::test
