#include "sqlite/connection_mutex.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "dlm/error.h"

namespace dlm::internal::sqlite {

ConnectionMutex::ConnectionMutex(std::string path,
                                 std::chrono::milliseconds busyTimeout)
    : path_(std::move(path)), busyTimeout_(busyTimeout) {}

std::unique_lock<std::timed_mutex> ConnectionMutex::lock(std::string_view what,
                                                         Deadline callLimit) {
  // The uncontended case costs no clock read.
  std::unique_lock<std::timed_mutex> guard(mutex_, std::try_to_lock);
  if (guard.owns_lock()) return guard;

  const Deadline started = std::chrono::steady_clock::now();
  Deadline until = std::min(deadlineAfter(busyTimeout_), callLimit);
  bool atDeadline = false;
  if (const auto deadline = currentDeadline(); deadline && *deadline < until) {
    until = *deadline;
    atDeadline = true;
  }
  // steady_clock: try_lock_until waits on the monotonic clock, so a wall
  // clock step cannot stretch the wait.
  if (guard.try_lock_until(until)) return guard;

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

std::unique_lock<std::timed_mutex> ConnectionMutex::lockForClose() {
  return std::unique_lock<std::timed_mutex>(mutex_);
}

}  // namespace dlm::internal::sqlite
