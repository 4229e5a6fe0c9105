#include "sqlite/connection_mutex.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "dlm/error.h"

namespace dlm::internal::sqlite {

ConnectionMutex::ConnectionMutex(std::string path,
                                 std::chrono::milliseconds busyTimeout)
    : path_(std::move(path)), busyTimeout_(busyTimeout) {}

ConnectionMutex::Guard ConnectionMutex::lock(std::string_view what,
                                             Deadline callLimit) {
  std::unique_lock<std::mutex> lock(mutex_);
  // The uncontended case costs no clock read.
  if (!held_) {
    held_ = true;
    return Guard(this);
  }

  const Deadline started = std::chrono::steady_clock::now();
  Deadline until = std::min(deadlineAfter(busyTimeout_), callLimit);
  bool atDeadline = false;
  if (const auto deadline = currentDeadline(); deadline && *deadline < until) {
    until = *deadline;
    atDeadline = true;
  }
  // steady_clock: a wall clock step cannot stretch the wait.
  if (released_.wait_until(lock, until, [this] { return !held_; })) {
    held_ = true;
    return Guard(this);
  }

  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  throw DLMException(
      ErrorCode::RETRIES_EXHAUSTED,
      fmt::format("sqlite store '{}': {} failed: waited {} ms for the store's "
                  "connection, in use by another thread of this process "
                  "(which may itself be waiting for the database write lock) "
                  "({}; busy timeout {} ms)",
                  path_, what, waited.count(),
                  atDeadline ? "the call's deadline" : "the busy timeout",
                  busyTimeout_.count()),
      /*transient=*/true);
}

ConnectionMutex::Guard ConnectionMutex::lockForClose() {
  std::unique_lock<std::mutex> lock(mutex_);
  released_.wait(lock, [this] { return !held_; });
  held_ = true;
  return Guard(this);
}

void ConnectionMutex::unlock() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    held_ = false;
  }
  released_.notify_one();
}

}  // namespace dlm::internal::sqlite
