#include "dlm/clock.h"

#include <thread>

namespace dlm {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() override { return std::chrono::steady_clock::now(); }
  void sleepFor(std::chrono::milliseconds duration) override {
    if (duration.count() > 0) std::this_thread::sleep_for(duration);
  }
};

}  // namespace

std::shared_ptr<Clock> Clock::system() {
  static const std::shared_ptr<Clock> kClock = std::make_shared<SystemClock>();
  return kClock;
}

}  // namespace dlm
