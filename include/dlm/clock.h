// The clock the manager uses for waiting and backoff. Lock expiry is never
// judged by this clock: it is the store's (the database's) business.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "dlm/export.h"

namespace dlm {

// A wake-up flag that one waiting thread sleeps on and others set (a release
// of the lock it waits for).
class DLM_API WakeSignal {
 public:
  // Sets the flag and wakes the thread sleeping on it.
  void notify();
  // Clears the flag; true if it was set.
  bool reset();
  bool isSet();
  // Blocks until the flag is set or `duration` has passed; true if set. Does
  // not clear the flag.
  bool waitFor(std::chrono::milliseconds duration);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool set_ = false;
};

class DLM_API Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  virtual TimePoint now() = 0;
  // Blocks the calling thread for `duration` (or returns at once if <= 0).
  virtual void sleepFor(std::chrono::milliseconds duration) = 0;
  // Like sleepFor, but returns as soon as `signal` is set (at once if it
  // already is). True when the signal ended the sleep. The default, for test
  // clocks, sleeps the whole duration with sleepFor and then reports the flag.
  virtual bool sleepUntilSignalled(std::chrono::milliseconds duration,
                                   WakeSignal& signal);

  // std::chrono::steady_clock, std::this_thread::sleep_for and a condition
  // variable wait.
  static std::shared_ptr<Clock> system();
};

}  // namespace dlm
