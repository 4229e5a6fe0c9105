// The SQLite store's busy handler: how a connection waits for the write lock
// that another connection (thread or process) holds.
//
// SQLite's own sqlite3_busy_timeout sleeps 1, 2, 5, 10, ... up to 100 ms
// between attempts. Lock-store transactions hold the write lock for tens of
// microseconds to a millisecond, so a waiter that just went to sleep for
// 100 ms is overtaken by every contender that arrives meanwhile; with four
// processes cycling on the same keys that gave waits of seconds. This handler
// polls every few hundred microseconds instead (with jitter, so waiters that
// started together do not retry in lockstep) until the wait's end has come.
// Measured with tests/sqlite/busy_wait_bench.cpp (4 processes, 5 s, 2 cores):
// the default backoff left processes waiting 3-5 s for one transaction; this
// handler gave every process a fair share with p99 waits of 10-25 ms.
// Tried and not adopted: waiters advertising themselves (an OFD lock on a
// side file) so a committer pauses before its next BEGIN cut the worst wait
// about 3x but doubled the median and needs Linux-only locks and an extra file.
//
// A wait ends at the earliest of: `timeout` after that wait began; the
// deadline of the calling thread's store call (dlm::currentDeadline(), read
// when the wait begins: the handler runs on the thread that steps the
// statement), so a caller with 300 ms left is not kept for a 5 s busy
// timeout; and the call's own limit (limitCall) when the caller set no
// deadline.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace dlm::internal::sqlite {

class BusyWait {
 public:
  using Clock = std::chrono::steady_clock;

  explicit BusyWait(std::chrono::milliseconds timeout);

  // Installs this handler on `db`. `this` must outlive the connection (or
  // the handler's replacement).
  void install(sqlite3* db);

  std::chrono::milliseconds timeout() const { return timeout_; }

  // The store call starting now must end by `ends`: every wait in it ends by
  // then too. The store sets this, with its connection to itself, for calls
  // whose caller set no deadline (its default bound: busyTimeout from the
  // call's start, which a wait for the connection has already used up in
  // part). Deadline::max() for no limit beyond the deadline and `timeout`.
  void limitCall(std::chrono::steady_clock::time_point ends) {
    callLimit_ = ends;
  }

  // For the error message after SQLITE_BUSY: how long the last wait lasted
  // and what ended it, e.g. "waited 300 ms for the database write lock (the
  // call's deadline; busy timeout 5000 ms)". When no wait gave up yet (busy
  // reported without the handler, e.g. a lock held by this very connection),
  // names only the busy timeout.
  std::string describeLastWait() const;

 private:
  // sqlite3_busy_handler callback: nonzero = try again. `attempt` is 0 on
  // the first call of one wait.
  static int onBusy(void* self, int attempt);
  std::chrono::microseconds nextSleep(std::chrono::microseconds left);

  std::chrono::milliseconds timeout_;
  // The current (or last) wait: when it began, when it must end, and whether
  // that end is the caller's deadline rather than the busy timeout.
  Clock::time_point callLimit_ = Clock::time_point::max();
  Clock::time_point waitStarted_;
  Clock::time_point waitEnds_;
  bool endsAtDeadline_ = false;
  // How long the last wait that gave up lasted; negative when none did.
  std::chrono::milliseconds gaveUpAfter_{-1};
  std::uint64_t rng_;  // xorshift state for the jitter
};

}  // namespace dlm::internal::sqlite
