#include "dlm/clock.h"

#include <thread>

namespace dlm {

void WakeSignal::notify() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    set_ = true;
  }
  changed_.notify_all();
}

bool WakeSignal::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool was = set_;
  set_ = false;
  return was;
}

bool WakeSignal::isSet() {
  std::lock_guard<std::mutex> lock(mutex_);
  return set_;
}

bool WakeSignal::waitFor(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (duration.count() <= 0) return set_;
  return changed_.wait_for(lock, duration, [this] { return set_; });
}

bool Clock::sleepUntilSignalled(std::chrono::milliseconds duration,
                                WakeSignal& signal) {
  if (signal.isSet()) return true;
  sleepFor(duration);
  return signal.isSet();
}

namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() override { return std::chrono::steady_clock::now(); }
  void sleepFor(std::chrono::milliseconds duration) override {
    if (duration.count() > 0) std::this_thread::sleep_for(duration);
  }
  bool sleepUntilSignalled(std::chrono::milliseconds duration,
                           WakeSignal& signal) override {
    return signal.waitFor(duration);
  }
};

}  // namespace

std::shared_ptr<Clock> Clock::system() {
  static const std::shared_ptr<Clock> kClock = std::make_shared<SystemClock>();
  return kClock;
}

}  // namespace dlm
