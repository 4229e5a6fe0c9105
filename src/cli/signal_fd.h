// The signals dlmctl exec handles (SIGINT, SIGTERM, SIGHUP, SIGCHLD), read
// from a signalfd instead of run in handlers: nothing runs in signal context.
#pragma once

#include <signal.h>

#include "unique_fd.h"

namespace dlm::cli {

class SignalFd {
 public:
  // Blocks the signals in the calling thread and opens the descriptor. Must
  // be called on the main thread before any other thread starts: threads
  // inherit the mask, so none of them can take the default action (death)
  // for a signal meant for the loop. Throws std::system_error.
  SignalFd();
  // Restores the previous signal mask.
  ~SignalFd();
  SignalFd(const SignalFd&) = delete;
  SignalFd& operator=(const SignalFd&) = delete;

  // Readable when a signal is pending (for poll()).
  int fd() const { return fd_.get(); }
  // The next pending signal, or 0 when none is; never blocks.
  int take();

 private:
  sigset_t previous_;
  UniqueFd fd_;
};

}  // namespace dlm::cli
