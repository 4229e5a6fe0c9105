// The mutex that gives one thread at a time the SqliteStore's connection,
// with a bounded wait.
//
// A thread that finds the connection in use may be queued behind another
// thread of this process that sits in a busy wait for the file's write lock
// (up to busyTimeout). Waiting without bound there would let one slow writer
// elsewhere hang every thread of the store, whatever their deadlines; so the
// wait ends with the same transient busy error as a busy wait on the file.
//
// Waiters are served in arrival order: a thread that releases the connection
// and asks for it again at once (a worker cycling acquire/release) queues
// behind the threads already waiting, instead of winning every race for a
// plain mutex and keeping them out until their deadlines.
#pragma once

#include <chrono>
#include <cstddef>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "dlm/deadline.h"

namespace dlm::internal::sqlite {

// Built from a plain mutex, a condition variable and a flag rather than
// std::timed_mutex: libstdc++'s timed_mutex::try_lock_until on the steady
// clock calls pthread_mutex_clocklock, which the thread sanitizer of GCC 12
// does not see, so it reported races on everything the mutex guards.
class ConnectionMutex {
 public:
  // Holds the connection while it lives (move-only).
  class Guard {
   public:
    explicit Guard(ConnectionMutex* owner) : owner_(owner) {}
    Guard(Guard&& other) noexcept
        : owner_(std::exchange(other.owner_, nullptr)) {}
    Guard& operator=(Guard&&) = delete;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() {
      if (owner_ != nullptr) owner_->unlock();
    }

   private:
    ConnectionMutex* owner_;
  };

  // `path` and `busyTimeout` are for the error message and the default
  // bound of a wait.
  ConnectionMutex(std::string path, std::chrono::milliseconds busyTimeout);
  ConnectionMutex(const ConnectionMutex&) = delete;
  ConnectionMutex& operator=(const ConnectionMutex&) = delete;

  // Waits for the connection until the calling thread's currentDeadline(),
  // `callLimit` (the call's own bound when its caller set no deadline) or
  // busyTimeout from now, whichever comes first (a bound already past still
  // takes a free mutex: only waiting is refused). Throws
  // DLMException(RETRIES_EXHAUSTED, transient) naming `what` (the store call)
  // and how long it waited for the connection.
  Guard lock(std::string_view what, Deadline callLimit = Deadline::max());

  // Waits without a bound of its own: for close(), which must not leave the
  // connection open. The holder it waits for is itself bounded (its busy
  // waits end at its deadline or busy timeout).
  Guard lockForClose();

  // How many threads are queued for their turn now (for tests that need a
  // known arrival order).
  std::size_t waiting();

 private:
  // A thread waiting its turn; the releasing thread hands the connection to
  // the oldest one by setting `granted`.
  struct Waiter {
    std::condition_variable turn;
    bool granted = false;
  };

  // Queues the calling thread and waits for its turn until `until` (no bound
  // when nullopt); true when it was handed the connection.
  bool waitTurn(std::unique_lock<std::mutex>& lock,
                const std::optional<Deadline>& until);
  void unlock();

  const std::string path_;
  const std::chrono::milliseconds busyTimeout_;
  std::mutex mutex_;  // guards held_ and waiters_
  std::list<Waiter> waiters_;
  bool held_ = false;
};

}  // namespace dlm::internal::sqlite
