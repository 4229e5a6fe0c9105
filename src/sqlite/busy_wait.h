// The SQLite store's busy handler: how a connection waits for the write lock
// that another connection (thread or process) holds.
//
// SQLite's own sqlite3_busy_timeout sleeps 1, 2, 5, 10, ... up to 100 ms
// between attempts. Lock-store transactions hold the write lock for tens of
// microseconds to a millisecond, so a waiter that just went to sleep for
// 100 ms is overtaken by every contender that arrives meanwhile; with four
// processes cycling on the same keys that gave waits of seconds. This handler
// polls every few hundred microseconds instead (with jitter, so waiters that
// started together do not retry in lockstep) until the timeout has passed.
// See tests/sqlite/busy_wait_bench.cpp for the measurement.
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>

namespace dlm::internal::sqlite {

class BusyWait {
 public:
  explicit BusyWait(std::chrono::milliseconds timeout);

  // Installs this handler on `db`. `this` must outlive the connection (or
  // the handler's replacement).
  void install(sqlite3* db);

  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  // sqlite3_busy_handler callback: nonzero = try again. `attempt` is 0 on
  // the first call of one wait.
  static int onBusy(void* self, int attempt);
  std::chrono::microseconds nextSleep(std::chrono::microseconds left);

  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point waitStarted_;
  std::uint64_t rng_;  // xorshift state for the jitter
};

}  // namespace dlm::internal::sqlite
