// dlmctl exec: runs a command while holding a lock, renewing the lease while
// the command runs. The promise: the command never runs without the lock,
// and the lock is never kept for a command that ended.
//  - The command leads its own process group and gets SIGKILL if dlmctl dies
//    (child_process.h), so it cannot outlive dlmctl, even a kill -9.
//  - SIGINT, SIGTERM and SIGHUP to dlmctl are passed on to the group; dlmctl
//    waits for the group to end, then releases.
//  - A lost lease sends the group SIGTERM, then SIGKILL after --kill-after.
//  - Signals are read from a signalfd and the loss from a pipe, in one poll()
//    loop on the main thread: no work in signal handlers.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <vector>

#include "cli/child_process.h"
#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/signal_fd.h"
#include "cli/unique_fd.h"
#include "dlm/lock_guard.h"

extern char** environ;

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Exit status when the lock is held elsewhere and the command did not run
// (EX_TEMPFAIL of sysexits.h: "try again later").
constexpr int kLockUnavailable = 75;
// Exit status when the lock was lost while the command ran.
constexpr int kLockLost = 1;
// How long a waiting acquire runs before dlmctl looks for signals again: the
// bound on how late a Ctrl-C during the wait is noticed.
constexpr milliseconds kWaitSlice{250};

struct ExecOptions {
  std::string id;
  bool xdc = false;
  milliseconds ttl{60000};
  milliseconds wait{0};
  milliseconds killAfter{1000};
  bool killAfterGiven = false;
  int conflictExitCode = kLockUnavailable;
  std::vector<std::string> command;
};

milliseconds seconds(const std::string& option, const std::string& text,
                     double min) {
  return milliseconds(static_cast<std::int64_t>(
      parseDecimal(option, text, min, 86400) * 1000 + 0.5));
}

ExecOptions parseOptions(Args& args) {
  ExecOptions o;
  const auto id = args.take("--lock");
  if (!id) throw UsageError("exec needs --lock ID");
  o.id = *id;
  o.xdc = args.takeFlag("--xdc");
  if (auto ttl = args.take("--ttl")) o.ttl = seconds("--ttl", *ttl, 0.001);
  auto wait = args.take("--wait");
  if (auto w = args.take("-w")) wait = w;
  const bool once = args.takeFlag("-n");
  if (once && wait) throw UsageError("-n and --wait exclude each other");
  if (wait) o.wait = seconds("--wait", *wait, 0);
  if (auto k = args.take("--kill-after")) {
    o.killAfter = seconds("--kill-after", *k, 0);
    o.killAfterGiven = true;
  }
  auto conflict = args.take("--conflict-exit-code");
  if (auto e = args.take("-E")) conflict = e;
  if (conflict) {
    o.conflictExitCode =
        static_cast<int>(parseInteger("--conflict-exit-code", *conflict, 0, 255));
  }
  while (auto word = args.takePositional()) o.command.push_back(*word);
  if (o.command.empty()) throw UsageError("exec needs a command after --");
  args.requireEmpty();
  return o;
}

// The keep-alive reports a loss this long before the lease ends (it mirrors
// lossMargin in src/keep_alive.cpp); SIGKILL must come well inside it, or the
// command could outlive the lease, so --kill-after gets at most half of it.
milliseconds maxKillAfter(milliseconds ttl) {
  return std::clamp(ttl / 10, milliseconds(20), milliseconds(2000)) / 2;
}

std::vector<std::string> childEnvironment(const Lock& lock) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLM_FENCING_TOKEN=", 18) != 0 &&
        std::strncmp(*e, "DLM_LOCK_KEY=", 13) != 0) {
      env.emplace_back(*e);
    }
  }
  env.push_back(fmt::format("DLM_FENCING_TOKEN={}", lock.fencingToken()));
  env.push_back("DLM_LOCK_KEY=" + lock.storeKey());
  return env;
}

bool isStopSignal(int sig) {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

// The first pending SIGINT/SIGTERM/SIGHUP (SIGCHLD is of no interest while
// no child runs), or 0.
int pendingStopSignal(SignalFd& signals) {
  for (int sig = signals.take(); sig != 0; sig = signals.take()) {
    if (isStopSignal(sig)) return sig;
  }
  return 0;
}

// Acquires `lock`, waiting up to `wait` in short slices so that a stop
// signal during the wait is acted on. Returns 0 once held, else the exit
// status: conflictExitCode when the wait ran out, 128+N for signal N.
int acquire(DistributedLockManager& manager, Lock& lock,
            const ExecOptions& o, SignalFd& signals) {
  const auto deadline = Clock::now() + o.wait;
  for (;;) {
    const auto left = std::max(
        milliseconds(0),
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    const milliseconds slice = std::min(left, kWaitSlice);
    try {
      if (slice.count() == 0) {
        manager.tryAcquireLock(lock, o.ttl);
      } else {
        manager.acquireLock(lock, o.ttl, slice);
      }
      return 0;
    } catch (const DLMException& e) {
      if (e.code() != ErrorCode::LOCK_UNAVAILABLE) throw;
      if (slice >= left) {
        std::fprintf(stderr, "dlmctl: %s; not running the command\n",
                     e.what());
        return o.conflictExitCode;
      }
    }
    if (const int sig = pendingStopSignal(signals)) {
      std::fprintf(stderr,
                   "dlmctl: %s while waiting for the lock; not running the "
                   "command\n",
                   strsignal(sig));
      return 128 + sig;
    }
  }
}

// A pipe the keep-alive thread writes one byte to when the lease is lost,
// so that the poll() loop wakes up.
class LossPipe {
 public:
  LossPipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    read_ = UniqueFd(fds[0]);
    write_ = UniqueFd(fds[1]);
  }
  void notify() const {
    const char byte = 1;
    ssize_t ignored = ::write(write_.get(), &byte, 1);
    (void)ignored;  // full pipe: a wake-up is pending anyway
  }
  int fd() const { return read_.get(); }

 private:
  UniqueFd read_;
  UniqueFd write_;
};

// Runs the command under the held guard until its whole process group has
// ended. Returns true when the lock was lost meanwhile.
bool supervise(ChildProcess& child, const LossPipe& loss, SignalFd& signals,
               milliseconds killAfter, const LockGuard& guard) {
  const std::string lockId = guard.lock().lockId();
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
      std::fprintf(stderr,
                   "dlmctl: the command ended; waiting for the processes it "
                   "left in its process group\n");
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
      // When the last confirmed lease ends (epoch ms, the store's clock),
      // for the operator and for the test that checks SIGKILL comes first.
      const auto end = guard.expiresAt();
      const auto left = std::chrono::duration_cast<milliseconds>(
          end - std::chrono::system_clock::now());
      std::fprintf(
          stderr,
          "dlmctl: the lock '%s' was lost; stopping the command (SIGTERM, "
          "SIGKILL in %.3g s); its last confirmed lease ends at %lld (epoch "
          "ms, in %lld ms)\n",
          lockId.c_str(), static_cast<double>(killAfter.count()) / 1000,
          static_cast<long long>(
              std::chrono::duration_cast<milliseconds>(end.time_since_epoch())
                  .count()),
          static_cast<long long>(left.count()));
      child.signalGroup(SIGTERM);
      killAt = Clock::now() + killAfter;
      killPending = true;
    }
    for (int sig = signals.take(); sig != 0; sig = signals.take()) {
      // SIGCHLD: reaped at the top of the loop.
      if (isStopSignal(sig)) child.signalGroup(sig);
    }
    if (killPending && Clock::now() >= killAt) {
      child.signalGroup(SIGKILL);
      killPending = false;
    }
  }
}

}  // namespace

std::vector<std::string> execValueOptions() {
  return {"--lock", "--ttl", "--wait", "-w", "--kill-after", "-E",
          "--conflict-exit-code"};
}

int runExec(const GlobalOptions& global, Args& args) {
  ExecOptions o = parseOptions(args);
  const milliseconds killCap = maxKillAfter(o.ttl);
  if (o.killAfter > killCap) {
    if (o.killAfterGiven) {
      std::fprintf(stderr,
                   "dlmctl: --kill-after clamped to %.3g s: a lost lease may "
                   "end %.3g s after the loss is reported, and the command "
                   "must be gone well before\n",
                   static_cast<double>(killCap.count()) / 1000,
                   static_cast<double>(killCap.count()) * 2 / 1000);
    }
    o.killAfter = killCap;
  }

  // Before any thread exists (the manager starts some): see SignalFd.
  SignalFd signals;
  LockConfiguration config;
  config.lockTtl = o.ttl;
  auto manager = openManager(global, openCliStore(global),
                             /*applyMigrations=*/false, config);
  Lock lock =
      manager->getLockInstance(o.id, o.xdc ? LockLevel::XDC : LockLevel::DC);
  if (const int status = acquire(*manager, lock, o, signals); status != 0) {
    return status;
  }

  // Declared before the guard: the keep-alive may write to it until the
  // guard is gone.
  LossPipe loss;
  LockGuard guard(
      *manager, std::move(lock),
      KeepAliveOptions{true, [&loss](const DLMException&) { loss.notify(); }});
  if (const int sig = pendingStopSignal(signals)) {
    std::fprintf(stderr, "dlmctl: %s; not running the command\n",
                 strsignal(sig));
    guard.release();
    return 128 + sig;
  }
  const std::string lockId = guard.lock().lockId();
  if (guard.lost()) {
    // Lost between the acquisition and now: the command must not start.
    std::fprintf(stderr,
                 "dlmctl: the lock '%s' was lost before the command started; "
                 "not running it\n",
                 lockId.c_str());
    return kLockLost;
  }
  ChildProcess child =
      ChildProcess::start(o.command, childEnvironment(guard.lock()));
  if (!child.started()) {
    guard.release();
    return child.exitStatus();
  }
  const bool lost = supervise(child, loss, signals, o.killAfter, guard);
  if (lost || guard.lost()) {
    std::fprintf(stderr,
                 "dlmctl: the lock '%s' was lost while the command ran; the "
                 "command was stopped (its status: %d)\n",
                 lockId.c_str(), child.exitStatus());
    return kLockLost;
  }
  // Only now: the command and its whole group have ended.
  if (!guard.release()) {
    std::fprintf(stderr, "dlmctl: the lock was taken over before release\n");
    return kLockLost;
  }
  return child.exitStatus();
}

}  // namespace dlm::cli
