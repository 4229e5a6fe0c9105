// While dlmctl exec's command runs: passes signals to its process group,
// stops it when the lease is lost, and waits until the whole group ended.
#pragma once

#include <chrono>
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

// Runs until the command and every process left in its group have ended,
// reaping them. SIGINT, SIGTERM and SIGHUP read from `signals` go to the
// group; a byte on `loss` sends it SIGTERM, then SIGKILL `killAfter` later.
// `guard` holds the lock, `lockName` names it in messages. Returns true
// when the lock was lost. Blocks as long as the command runs. `quiet` (-q):
// no note that the command left processes behind.
bool superviseCommand(ChildProcess& child, const WakePipe& loss,
                      SignalFd& signals, std::chrono::milliseconds killAfter,
                      const LockGuard& guard, const std::string& lockName,
                      bool quiet);

}  // namespace dlm::cli
