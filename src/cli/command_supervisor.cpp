#include "command_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <system_error>

#include "output_text.h"

namespace dlm::cli {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

WakePipe::WakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  read_ = UniqueFd(fds[0]);
  write_ = UniqueFd(fds[1]);
}

void WakePipe::notify() const {
  const char byte = 1;
  ssize_t ignored = ::write(write_.get(), &byte, 1);
  (void)ignored;  // full pipe: a wake-up is pending anyway
}

bool superviseCommand(ChildProcess& child, const WakePipe& loss,
                      SignalFd& signals, milliseconds killAfter,
                      const LockGuard& guard, const std::string& lockName,
                      bool quiet) {
  bool lost = false;
  bool leftoverNoted = false;
  // SIGKILL is due at killAt while killPending (an optional here trips GCC's
  // maybe-uninitialized warning).
  bool killPending = false;
  Clock::time_point killAt{};
  for (;;) {
    child.reap();
    const bool groupAlive = child.groupAlive();
    if (child.ended() && !groupAlive) return lost;
    if (child.ended() && !leftoverNoted) {
      // Processes the command started in its group still run: they are the
      // command too, so the lock stays held for them.
      if (!quiet) {
        std::fprintf(stderr,
                     "dlmctl: the command ended; waiting for the processes "
                     "it left in its process group\n");
      }
      leftoverNoted = true;
    }
    int timeout = -1;
    if (killPending) {
      timeout = static_cast<int>(std::max<std::int64_t>(
          0, std::chrono::duration_cast<milliseconds>(killAt - Clock::now())
                     .count() +
                 1));
    }
    // Group members that are not our children send no SIGCHLD: look again
    // now and then.
    if (child.ended()) timeout = timeout < 0 ? 100 : std::min(timeout, 100);
    // Once the loss is handled, its pipe stays readable: leave it out, or
    // poll() would spin.
    pollfd fds[2] = {{signals.fd(), POLLIN, 0},
                     {lost ? -1 : loss.fd(), POLLIN, 0}};
    const int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (!lost && n > 0 && (fds[1].revents & POLLIN) != 0) {
      lost = true;
      // When the last confirmed lease ends (the store's clock), for the
      // operator and for the test that checks SIGKILL comes first.
      const StoreTime end = guard.expiresAt();
      const auto left = std::chrono::duration_cast<milliseconds>(
          end - std::chrono::system_clock::now());
      const std::string when = left.count() >= 0
                                   ? "in " + formatDuration(left)
                                   : formatDuration(-left) + " ago";
      std::fprintf(
          stderr,
          "dlmctl: the lock %s was lost; stopping the command (SIGTERM, "
          "SIGKILL in %s); its last confirmed lease ends at %s (%s)\n",
          lockName.c_str(), formatDuration(killAfter).c_str(),
          formatUtc(end).c_str(), when.c_str());
      child.signalGroup(SIGTERM);
      killAt = Clock::now() + killAfter;
      killPending = true;
    }
    for (int sig = signals.take(); sig != 0; sig = signals.take()) {
      // SIGCHLD: reaped at the top of the loop.
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        child.signalGroup(sig);
      }
    }
    if (killPending && Clock::now() >= killAt) {
      child.signalGroup(SIGKILL);
      killPending = false;
    }
  }
}

}  // namespace dlm::cli
