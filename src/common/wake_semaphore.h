// WakeSemaphore: a counting semaphore that one thread waits on (C++17 has
// none), over POSIX sem_t.
//
// Two properties a mutex and condition variable lack: a post wakes the
// waiter without making it contend for a lock the poster holds, and the
// waiter may destroy the semaphore as soon as its wait took the last post,
// even while that post() is still returning (glibc's sem_post only makes
// the futex wake-up call once the count went up, which is safe on memory
// that is still mapped: POSIX requires it, glibc bug 12674).
#pragma once

#include <semaphore.h>

#include <cerrno>
#include <chrono>
#include <ctime>

#include "common/hidden.h"
#include "dlm/deadline.h"

namespace dlm::internal {

class DLM_HIDDEN WakeSemaphore {
 public:
  WakeSemaphore() noexcept { sem_init(&sem_, 0, 0); }
  ~WakeSemaphore() { sem_destroy(&sem_); }
  WakeSemaphore(const WakeSemaphore&) = delete;
  WakeSemaphore& operator=(const WakeSemaphore&) = delete;

  void post() noexcept { sem_post(&sem_); }

  // Takes one post, waiting for it as long as it takes.
  void wait() noexcept {
    while (sem_wait(&sem_) != 0 && errno == EINTR) {
    }
  }

  // Takes one post, waiting for it until `deadline` (the steady clock, which
  // is CLOCK_MONOTONIC); false when none came by then.
  bool waitUntil(Deadline deadline) noexcept {
    if (deadline == Deadline::max()) {
      wait();
      return true;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        deadline.time_since_epoch())
                        .count();
    timespec at{};
    at.tv_sec = static_cast<std::time_t>(ns / 1000000000);
    at.tv_nsec = static_cast<long>(ns % 1000000000);
    for (;;) {
      if (sem_clockwait(&sem_, CLOCK_MONOTONIC, &at) == 0) return true;
      if (errno != EINTR) return false;
    }
  }

 private:
  sem_t sem_;
};

}  // namespace dlm::internal
