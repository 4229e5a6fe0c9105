// The mutex that gives one thread at a time the SqliteStore's connection,
// with a bounded wait.
//
// A thread that finds the connection in use may be queued behind another
// thread of this process that sits in a busy wait for the file's write lock
// (up to busyTimeout). Waiting without bound there would let one slow writer
// elsewhere hang every thread of the store, whatever their deadlines; so the
// wait ends with the same transient busy error as a busy wait on the file.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

#include "dlm/deadline.h"

namespace dlm::internal::sqlite {

class ConnectionMutex {
 public:
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
  std::unique_lock<std::timed_mutex> lock(std::string_view what,
                                          Deadline callLimit = Deadline::max());

  // Waits without a bound of its own: for close(), which must not leave the
  // connection open. The holder it waits for is itself bounded (its busy
  // waits end at its deadline or busy timeout).
  std::unique_lock<std::timed_mutex> lockForClose();

 private:
  const std::string path_;
  const std::chrono::milliseconds busyTimeout_;
  std::timed_mutex mutex_;
};

}  // namespace dlm::internal::sqlite
