#include "signal_fd.h"

#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace dlm::cli {

namespace {

sigset_t handledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  // SIGCHLD too: the loop learns of the child's end without a handler.
  sigaddset(&set, SIGCHLD);
  return set;
}

}  // namespace

SignalFd::SignalFd() {
  const sigset_t set = handledSignals();
  if (const int rc = pthread_sigmask(SIG_BLOCK, &set, &previous_); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
  }
  const int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    throw std::system_error(err, std::generic_category(), "signalfd");
  }
  fd_ = UniqueFd(fd);
}

SignalFd::~SignalFd() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }

int SignalFd::take() {
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      return static_cast<int>(info.ssi_signo);
    }
    if (n < 0 && errno == EINTR) continue;
    return 0;  // EAGAIN: nothing pending
  }
}

}  // namespace dlm::cli
