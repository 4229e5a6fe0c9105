// The clock the manager uses for waiting and backoff. Lock expiry is never
// judged by this clock: it is the store's (the database's) business.
#pragma once

#include <chrono>
#include <memory>

namespace dlm {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  virtual TimePoint now() = 0;
  // Blocks the calling thread for `duration` (or returns at once if <= 0).
  virtual void sleepFor(std::chrono::milliseconds duration) = 0;

  // std::chrono::steady_clock and std::this_thread::sleep_for.
  static std::shared_ptr<Clock> system();
};

}  // namespace dlm
