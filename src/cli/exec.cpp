// dlmctl exec: runs a command while holding a lock, renewing the lease while
// the command runs. The promise: the command never runs without the lock,
// and the lock is never kept for a command that ended.
//  - The command leads its own process group and gets SIGKILL if dlmctl dies
//    (child_process.h), so it cannot outlive dlmctl, even a kill -9.
//  - SIGINT, SIGTERM and SIGHUP to dlmctl are passed on to the group; dlmctl
//    waits for the group to end, then releases.
//  - A lost lease sends the group SIGTERM, then SIGKILL after --kill-after.
//  - Signals are read from a signalfd and the loss from a pipe, in one poll()
//    loop on the main thread (command_supervisor.h): no signal handlers.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli/child_process.h"
#include "cli/command_supervisor.h"
#include "cli/commands.h"
#include "cli/output_text.h"
#include "cli/signal_fd.h"
#include "dlm/deadline.h"
#include "dlm/lock_guard.h"
#include "keep_alive.h"

extern char** environ;

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Exit status when the lock was lost while the command ran.
constexpr int kLockLost = 1;
// How long a waiting acquire runs before dlmctl looks for signals again: the
// bound on how late a Ctrl-C during the wait is noticed.
constexpr milliseconds kWaitSlice{250};

// The keep-alive reports a loss this long before the lease ends; SIGKILL
// must come well inside it, or the command could outlive the lease, so
// --kill-after gets at most half of it.
milliseconds maxKillAfter(milliseconds ttl) {
  return internal::lossMargin(ttl) / 2;
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

double secondsOf(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// "held by owner O (host H, pid P) since T UTC, expires T UTC", naming the
// key when it is not the lock's own (an ancestor or descendant blocks it).
std::string holderText(const LockRecord& r, const std::string& ownKey) {
  std::string text =
      r.key == ownKey ? std::string("held")
                      : fmt::format("blocked by '{}', held", printable(r.key));
  text += fmt::format(" by owner {} (host {}, pid {}", r.owner,
                      printable(r.holder.host), r.holder.pid);
  if (!r.holderIp.empty()) text += ", address " + r.holderIp;
  return text + fmt::format(") since {} UTC, expires {} UTC",
                            formatUtc(r.acquiredAt), formatUtc(r.expiresAt));
}

// Who blocks `key`, as holderText says it; "held elsewhere" when the store
// cannot tell (the holder just left, or the store did not answer: the
// description is only for the operator).
std::string blockerText(LockStore& store, const StoreKey& key) {
  try {
    const DeadlineScope deadline(
        deadlineAfter(LockConfiguration{}.operationTimeout));
    if (auto r = findBlocker(store, key)) return holderText(*r, key.key);
    return "held elsewhere (its holder just left)";
  } catch (const DLMException& e) {
    return "held elsewhere (who holds it is unknown: " + std::string(e.what()) +
           ")";
  }
}

// Acquires `lock`, waiting as `o` says in short slices so that a stop signal
// during the wait is acted on. Returns 0 once held, else the exit status:
// conflictExitCode when the wait ran out, 128+N for signal N.
int acquire(DistributedLockManager& manager, Lock& lock, const StoreKey& key,
            const ExecOptions& o, SignalFd& signals) {
  const auto started = Clock::now();
  const auto deadline = o.wait ? started + *o.wait : Clock::time_point::max();
  auto nextReport = started;
  bool waited = false;
  for (;;) {
    const auto left = std::max(milliseconds(0),
                               deadline == Clock::time_point::max()
                                   ? kWaitSlice
                                   : std::chrono::duration_cast<milliseconds>(
                                         deadline - Clock::now()));
    const milliseconds slice = std::min(left, kWaitSlice);
    try {
      if (slice.count() == 0) {
        manager.tryAcquireLock(lock, o.ttl);
      } else {
        manager.acquireLock(lock, o.ttl, slice);
      }
      if (o.verbose && waited) {
        fmt::print(stderr,
                   "dlmctl: acquired '{}' after {:.1f} s (fencing token {})\n",
                   printable(lock.lockId()), secondsOf(Clock::now() - started),
                   lock.fencingToken());
      }
      return 0;
    } catch (const DLMException& e) {
      if (e.code() != ErrorCode::LOCK_UNAVAILABLE) throw;
      if (o.wait && slice >= left) {
        fmt::print(stderr, "dlmctl: lock '{}' is {}; not running the command\n",
                   printable(lock.lockId()), blockerText(manager.store(), key));
        return o.conflictExitCode;
      }
    }
    waited = true;
    if (o.verbose && Clock::now() >= nextReport) {
      const bool first = nextReport == started;
      fmt::print(stderr, "dlmctl: {} '{}'{}: {}\n",
                 first ? "waiting for lock" : "still waiting for",
                 printable(lock.lockId()),
                 first ? std::string()
                       : fmt::format(" after {:.0f} s",
                                     secondsOf(Clock::now() - started)),
                 blockerText(manager.store(), key));
      nextReport = Clock::now() + o.progressEvery;
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

}  // namespace

int runExec(const GlobalOptions& global, const ExecOptions& options) {
  ExecOptions o = options;
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
  const StoreKey key = scopedKey(global, o.id, o.xdc);
  if (const int status = acquire(*manager, lock, key, o, signals);
      status != 0) {
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
  const bool lost = superviseCommand(child, loss, signals, o.killAfter, guard);
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
