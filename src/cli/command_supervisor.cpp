#include "command_supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <optional>
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

namespace {

// "its last confirmed lease ends at T (in D)", or "(D ago)".
std::string leaseEndText(const LockGuard& guard) {
  const StoreTime end = guard.expiresAt();
  const auto left = std::chrono::duration_cast<milliseconds>(
      end - std::chrono::system_clock::now());
  return fmt::format("its last confirmed lease ends at {} ({})", formatUtc(end),
                     left.count() >= 0 ? "in " + formatDuration(left)
                                       : formatDuration(-left) + " ago");
}

}  // namespace

Supervised superviseCommand(ChildProcess& child, const WakePipe& loss,
                            SignalFd& signals, const LockGuard& guard,
                            const SupervisorOptions& options) {
  Supervised outcome = Supervised::ENDED;
  bool leftoverNoted = false;
  // SIGKILL is due at killAt while killPending (an optional here trips GCC's
  // maybe-uninitialized warning).
  bool killPending = false;
  Clock::time_point killAt{};
  const auto stopping = [&](Supervised why) {
    outcome = why;
    if (options.beforeMessage) options.beforeMessage();
    // When the last confirmed lease ends (the store's clock), for the
    // operator and for the test that checks SIGKILL comes first.
    fmt::print(stderr,
               "dlmctl: the lock {} {}; stopping the command (SIGTERM, "
               "SIGKILL in {}); {}\n",
               options.lockName,
               why == Supervised::LOST
                   ? "was lost"
                   : "was not renewed in time for --kill-after",
               formatDuration(options.killAfter), leaseEndText(guard));
    child.signalGroup(SIGTERM);
    killAt = Clock::now() + options.killAfter;
    killPending = true;
  };
  for (;;) {
    child.reap();
    const bool groupAlive = child.groupAlive();
    if (child.ended() && !groupAlive) return outcome;
    if (child.ended() && !leftoverNoted) {
      // Processes the command started in its group still run: they are the
      // command too, so the lock stays held for them.
      if (!options.quiet) {
        std::fprintf(stderr,
                     "dlmctl: the command ended; waiting for the processes "
                     "it left in its process group\n");
      }
      leftoverNoted = true;
    }
    const bool stopped = outcome != Supervised::ENDED;
    // Wake for SIGKILL, and for the stop deadline while the command runs
    // unstopped.
    std::optional<Clock::time_point> wakeAt;
    if (killPending) wakeAt = killAt;
    if (!stopped && options.stopBy) {
      const Clock::time_point stopBy = options.stopBy();
      if (Clock::now() >= stopBy) {
        stopping(Supervised::UNCONFIRMED);
        continue;
      }
      wakeAt = wakeAt ? std::min(*wakeAt, stopBy) : stopBy;
    }
    int timeout = -1;
    if (wakeAt) {
      timeout = static_cast<int>(std::max<std::int64_t>(
          0, std::chrono::duration_cast<milliseconds>(*wakeAt - Clock::now())
                     .count() +
                 1));
    }
    // Group members that are not our children send no SIGCHLD: look again
    // now and then.
    if (child.ended()) timeout = timeout < 0 ? 100 : std::min(timeout, 100);
    // Once the command is being stopped, the loss pipe (which stays
    // readable) is left out, or poll() would spin.
    pollfd fds[2] = {{signals.fd(), POLLIN, 0},
                     {stopped ? -1 : loss.fd(), POLLIN, 0}};
    const int n = poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (outcome == Supervised::ENDED && n > 0 &&
        (fds[1].revents & POLLIN) != 0) {
      stopping(Supervised::LOST);
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
