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
  if (!held_ && waiters_.empty()) {
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
  if (waitTurn(lock, until)) return Guard(this);

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
  if (!held_ && waiters_.empty()) {
    held_ = true;
    return Guard(this);
  }
  waitTurn(lock, std::nullopt);
  return Guard(this);
}

bool ConnectionMutex::waitTurn(std::unique_lock<std::mutex>& lock,
                               const std::optional<Deadline>& until) {
  const auto me = waiters_.emplace(waiters_.end());
  const auto granted = [&] { return me->granted; };
  // steady_clock: a wall clock step cannot stretch the wait.
  const bool turn = until ? me->turn.wait_until(lock, *until, granted)
                          : (me->turn.wait(lock, granted), true);
  // Handed over (held_ stayed true for this thread), or gone from the queue
  // without it: either way this entry is done.
  waiters_.erase(me);
  return turn;
}

void ConnectionMutex::unlock() {
  std::lock_guard<std::mutex> lock(mutex_);
  // The oldest waiter still queued takes over; held_ stays true, so no
  // thread arriving meanwhile can slip in ahead of it.
  for (Waiter& w : waiters_) {
    if (w.granted) continue;
    w.granted = true;
    w.turn.notify_one();
    return;
  }
  held_ = false;
}

std::size_t ConnectionMutex::waiting() {
  const std::lock_guard<std::mutex> lock(mutex_);
  return waiters_.size();
}

}  // namespace dlm::internal::sqlite
