// While dlmctl exec's command runs: passes signals to its process group,
// stops it when the lease is lost, and waits until the whole group ended.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "child_process.h"
#include "signal_fd.h"
#include "unique_fd.h"
#include "dlm/lock_guard.h"

namespace dlm::cli {

// A pipe another thread writes one byte to so that a poll() on the main
// thread wakes up (the keep-alive when the lease is lost, the acquiring
// thread when it is done). Throws std::system_error.
class WakePipe {
 public:
  WakePipe();
  // Safe from any thread; never blocks.
  void notify() const;
  int fd() const { return read_.get(); }

 private:
  UniqueFd read_;
  UniqueFd write_;
};

// How superviseCommand ended.
enum class Supervised {
  ENDED,        // the command and its group ended; the lock is still held
  LOST,         // the keep-alive reported the lease lost
  UNCONFIRMED,  // no renewal confirmed the lease in time for --kill-after
};

struct SupervisorOptions {
  // SIGTERM to SIGKILL when the lease is lost or unconfirmed.
  std::chrono::milliseconds killAfter{1000};
  // When set: the instant at which the command must be told to stop
  // (SIGTERM) unless a renewal has moved it later by then; asked again
  // whenever it passes.
  std::function<std::chrono::steady_clock::time_point()> stopBy;
  // The lock as messages name it.
  std::string lockName;
  // Called before the first message about stopping the command (dlmctl
  // says which database first); may be empty.
  std::function<void()> beforeMessage;
  // -q: no note that the command left processes behind.
  bool quiet = false;
};

// Runs until the command and every process left in its group have ended,
// reaping them. SIGINT, SIGTERM and SIGHUP read from `signals` go to the
// group; a byte on `loss`, or `stopBy` passing, sends it SIGTERM, then
// SIGKILL `killAfter` later. `guard` holds the lock. Blocks as long as the
// command runs.
Supervised superviseCommand(ChildProcess& child, const WakePipe& loss,
                            SignalFd& signals, const LockGuard& guard,
                            const SupervisorOptions& options);

}  // namespace dlm::cli
