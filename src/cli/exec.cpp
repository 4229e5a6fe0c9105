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
#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "child_process.h"
#include "command_supervisor.h"
#include "commands.h"
#include "key_lookup.h"
#include "output_text.h"
#include "signal_fd.h"
#include "wait_reporter.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"
#include "dlm/lock_guard.h"
#include "dlm/owner.h"

extern char** environ;

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// dlmctl's own outcomes, told apart from the command's status (passed
// through as it is, like flock(1)) by codes commands rarely use
// (docs/dlmctl.md): the lock was lost (before the command started, while
// it ran, or taken over before the release), and the lock could not be
// taken for an error (EX_UNAVAILABLE: the store failed; the command did not
// run). Held elsewhere is ExecOptions::conflictExitCode (75), a refused
// login or privilege 77 (main.cpp).
constexpr int kLockLost = 76;
constexpr int kNotAcquired = 69;

// Reports `e`, which kept exec from taking the lock, as main() reports a
// library error, and says the command did not run.
int notAcquired(const GlobalOptions& global, const DLMException& e) {
  // A refused login or privilege keeps its own status (77).
  if (e.code() == ErrorCode::PERMISSION_DENIED) throw e;
  announceDatabase(global);
  fmt::print(stderr, "dlmctl: {}; not running the command [{}]\n", e.what(),
             toString(e.code()));
  return kNotAcquired;
}

// The lease as renewals confirmed it, on this process's steady clock, for
// a --kill-after longer than the keep-alive's own loss report leaves room
// for (half its margin): exec then starts stopping the command itself,
// --kill-after plus that margin before the lease could end.
//
// `end()` is a lower bound of when the lease ends. A lease ends TTL after
// the start of the call that set it; that start is not reported, so it is
// bounded from below: an extension exec makes itself (its start is known),
// then for each renewal the time of the event before it. The keep-alive
// renews one lease at a time on one thread and reports each renewal on
// that thread before it starts the next (dlm/lock_events.h), so renewal k
// began after the report of renewal k-1 (the first one after the guard
// existed).
class LeaseWatch final : public LockEventHandler {
 public:
  // `reporter` (may be null) gets every event too.
  LeaseWatch(std::shared_ptr<WaitReporter> reporter, milliseconds ttl)
      : reporter_(std::move(reporter)), ttl_(ttl) {}

  void onEvent(const LockEvent& e) override {
    if (reporter_) reporter_->onEvent(e);
    if (e.kind != LockEventKind::LEASE_RENEWED) return;
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!armed_ || e.key != key_) return;
    end_ = std::max(end_, previous_ + ttl_);
    previous_ = now;
  }

  // The lease on `key` was extended by a call that began at
  // `extensionStart`; renewals after `guardStart` are the keep-alive's.
  void arm(const std::string& key, Clock::time_point extensionStart,
           Clock::time_point guardStart) {
    std::lock_guard<std::mutex> lock(mutex_);
    key_ = key;
    end_ = extensionStart + ttl_;
    previous_ = guardStart;
    armed_ = true;
  }

  Clock::time_point end() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return end_;
  }

 private:
  const std::shared_ptr<WaitReporter> reporter_;
  const milliseconds ttl_;
  mutable std::mutex mutex_;
  bool armed_ = false;
  std::string key_;
  Clock::time_point end_;
  Clock::time_point previous_;
};

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

// "held MODE by owner O (host H, pid P) since T, expires T", naming the
// key that blocks when it is not the lock's own (an ancestor or a
// descendant).
std::string holderText(const LockRecord& r, const std::string& ownKey) {
  std::string text = r.key == ownKey
                         ? std::string("held")
                         : fmt::format("blocked by {}, held", keyText(r.key));
  text += fmt::format(" {} by owner {} (host {}, pid {}", lockModeName(r.mode),
                      r.owner, printable(r.holder.host), r.holder.pid);
  if (!r.holderIp.empty()) text += ", address " + r.holderIp;
  return text + fmt::format(") since {}, expires {}", formatUtc(r.acquiredAt),
                            formatUtc(r.expiresAt));
}

// "not held in its way, but an earlier MODE waiter for KEY (owner O, since
// T) goes first (fair queueing)".
std::string queuedText(const WaitRecord& w) {
  return fmt::format(
      "not held in its way, but an earlier {} waiter for {} (owner {}, "
      "since {}) goes first (fair queueing)",
      lockModeName(w.mode), keyText(w.key), w.owner, formatUtc(w.requestedAt));
}

// Who keeps `self` from taking `key` in `mode`: a conflicting hold as
// holderText says it, else an earlier conflicting waiter (queuedText);
// "held elsewhere" when the store cannot tell (the holder just left, or the
// store did not answer: the description is only for the operator).
std::string blockerText(LockStore& store, const StoreKey& key, LockMode mode,
                        const std::string& self) {
  try {
    const DeadlineScope deadline(
        deadlineAfter(LockConfiguration{}.operationTimeout));
    if (auto r = findBlocker(store, key, mode)) return holderText(*r, key.key);
    if (auto w = findQueuedAhead(store, key, mode, self)) return queuedText(*w);
    return "held elsewhere (its holder just left)";
  } catch (const DLMException& e) {
    return "held elsewhere (who holds it is unknown: " + std::string(e.what()) +
           ")";
  }
}

// "'id' (MODE, DC, farm F, client C)", how exec names its lock.
std::string lockText(const Lock& lock) {
  return keyText(lock.storeKey(), lock.lockMode());
}

// "Until the lock is free" (flock's default): a timeout beyond the clock,
// which acquireLock waits without a deadline (none shown by `waiters`).
constexpr milliseconds kForever = milliseconds::max();

// Joins a thread that may be waiting in acquireLock: stops the wait first,
// so that leaving acquire() early (an exception) cannot hang.
class AcquirerJoin {
 public:
  AcquirerJoin(DistributedLockManager& manager, std::thread& thread)
      : manager_(manager), thread_(thread) {}
  ~AcquirerJoin() { join(); }
  AcquirerJoin(const AcquirerJoin&) = delete;
  AcquirerJoin& operator=(const AcquirerJoin&) = delete;
  void join() {
    if (!thread_.joinable()) return;
    manager_.stopWaiting();
    thread_.join();
  }

 private:
  DistributedLockManager& manager_;
  std::thread& thread_;
};

// Acquires `lock`, waiting as `o` says. One acquireLock call runs on a
// thread of its own for the whole wait, so that its request row (and with
// it the waiter's place and age, as `dlmctl waiters` shows them) lasts as
// long as the wait; meanwhile this thread watches for stop signals (ending
// the wait with stopWaiting). With --verbose, `reporter` (the manager's
// event handler) has said who holds the lock while it waited.
// Returns 0 once held, else the exit status: conflictExitCode when the wait
// ran out, 128+N for signal N.
int acquire(const GlobalOptions& global, DistributedLockManager& manager,
            Lock& lock, const StoreKey& key, const ExecOptions& o,
            SignalFd& signals, const WaitReporter* reporter) {
  // Why the command did not run, unless --quiet (the exit status says it):
  // after the database it was about.
  const bool explain = global.verbosity != Verbosity::QUIET;
  const auto started = Clock::now();
  const milliseconds wait = o.wait.value_or(kForever);
  WakePipe done;
  std::exception_ptr failure;
  // The lock is this (main) thread's: its owner is the one recorded.
  const std::string owner = currentOwner();
  std::thread acquirer([&] {
    try {
      const OwnerScope sameOwner(owner);
      if (wait.count() == 0) {
        manager.tryAcquireLock(lock, o.ttl);
      } else {
        manager.acquireLock(lock, o.ttl, wait);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    done.notify();
  });
  AcquirerJoin joiner(manager, acquirer);

  int stopSignal = 0;
  for (;;) {
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {done.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if ((fds[1].revents & POLLIN) != 0) break;
    if (const int sig = pendingStopSignal(signals);
        sig != 0 && stopSignal == 0) {
      stopSignal = sig;
      manager.stopWaiting();
    }
  }
  joiner.join();

  if (stopSignal != 0) {
    // The last attempt may have succeeded as the signal came: give it back.
    if (lock.isAcquired()) {
      try {
        manager.releaseLock(lock);
      } catch (const DLMException& e) {
        fmt::print(stderr, "dlmctl: releasing the lock failed: {}\n", e.what());
      }
    }
    if (explain) {
      announceDatabase(global);
      fmt::print(stderr,
                 "dlmctl: {} while waiting for the lock; not running the "
                 "command\n",
                 strsignal(stopSignal));
    }
    return 128 + stopSignal;
  }
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const DLMException& e) {
      if (e.code() != ErrorCode::LOCK_UNAVAILABLE) throw;
      if (explain) {
        announceDatabase(global);
        fmt::print(stderr, "dlmctl: lock {} is {}; not running the command\n",
                   lockText(lock),
                   blockerText(manager.store(), key, lock.lockMode(), owner));
      }
      return o.conflictExitCode;
    }
  }
  if (reporter != nullptr && reporter->reported()) {
    fmt::print(stderr, "dlmctl: acquired {} after {} (fencing token {})\n",
               lockText(lock),
               formatDuration(std::chrono::duration_cast<milliseconds>(
                   Clock::now() - started)),
               lock.fencingToken());
  }
  return 0;
}

}  // namespace

int runExec(const GlobalOptions& given, const ExecOptions& options) {
  // --lock takes a key as dlmctl prints it ("XDC#billing#nightly.import"):
  // its level, farm and client replace --xdc, --farm and --client.
  GlobalOptions global = given;
  ExecOptions o = options;
  if (const std::optional<LockCoordinates> c = coordinatesOf(options.id)) {
    if (options.xdc) throw UsageError("--xdc is for lock ids, not keys");
    global.client = c->client;
    if (c->level == LockLevel::DC) global.farm = c->farm;
    o.xdc = c->level == LockLevel::XDC;
    o.id = c->id;
  }
  // The keep-alive reports a loss its margin before the lease ends; a
  // --kill-after up to half of it fits in there. A longer one (at most
  // maxKillAfter, checked with the options) needs exec to watch the lease
  // itself and start stopping the command that much earlier.
  const milliseconds margin = keepAliveLossMargin(o.ttl);
  const bool watchLease = o.killAfter > margin / 2;

  // Before any thread exists (the manager starts some): see SignalFd.
  SignalFd signals;
  LockConfiguration config;
  config.lockTtl = o.ttl;
  // --verbose: the manager's WAITING events (at the start of the wait, then
  // every --progress seconds) name who holds the lock.
  std::shared_ptr<WaitReporter> reporter;
  if (o.verbose) {
    reporter = std::make_shared<WaitReporter>();
    config.waitingReportInterval = o.progressEvery;
  }
  std::shared_ptr<LeaseWatch> watch;
  std::shared_ptr<LockEventHandler> events = reporter;
  if (watchLease) {
    watch = std::make_shared<LeaseWatch>(reporter, o.ttl);
    events = watch;
  }
  // A SQLite file that does not exist yet is created with its schema by
  // the store's initialize (in one transaction, so two execs starting on
  // one new file are safe), as flock(1) creates its lock file; PostgreSQL
  // must have the schema already (dlmctl migrate; a DBA's).
  // Until the command starts, a library error means it did not run.
  std::unique_ptr<DistributedLockManager> manager;
  std::optional<Lock> taken;
  try {
    const StoreKey key = scopedKey(global, o.id, o.xdc);
    manager = openManager(global, openCliStore(global),
                          /*applyMigrations=*/false, config, events);
    taken.emplace(manager->getLockInstance(
        o.id, o.xdc ? LockLevel::XDC : LockLevel::DC, o.mode));
    if (const int status = acquire(global, *manager, *taken, key, o, signals,
                                   reporter.get());
        status != 0) {
      return status;
    }
  } catch (const DLMException& e) {
    return notAcquired(global, e);
  }
  Lock& lock = *taken;

  if (watch) {
    // A lease whose start exec knows: the watch's first lower bound.
    const Clock::time_point extensionStart = Clock::now();
    try {
      manager->extendLock(lock, o.ttl);
    } catch (const DLMException& e) {
      if (e.code() == ErrorCode::LOCK_NOT_HELD) {
        announceDatabase(global);
        fmt::print(stderr,
                   "dlmctl: the lock {} was lost before the command started; "
                   "not running it\n",
                   lockText(lock));
        return kLockLost;
      }
      try {
        manager->releaseLock(lock);
      } catch (const DLMException&) {
        // The first error is the one to report; the lease runs out.
      }
      return notAcquired(global, e);
    }
    watch->arm(lock.storeKey(), extensionStart, Clock::now());
  }
  // Declared before the guard: the keep-alive may write to it until the
  // guard is gone.
  WakePipe loss;
  LockGuard guard(
      *manager, std::move(lock),
      KeepAliveOptions{true, [&loss](const DLMException&) { loss.notify(); }});
  const bool quiet = global.verbosity == Verbosity::QUIET;
  if (const int sig = pendingStopSignal(signals)) {
    if (!quiet) {
      announceDatabase(global);
      std::fprintf(stderr, "dlmctl: %s; not running the command\n",
                   strsignal(sig));
    }
    guard.release();
    return 128 + sig;
  }
  const std::string lockName = lockText(guard.lock());
  if (guard.lost()) {
    // Lost between the acquisition and now: the command must not start.
    announceDatabase(global);
    std::fprintf(stderr,
                 "dlmctl: the lock %s was lost before the command started; "
                 "not running it\n",
                 lockName.c_str());
    return kLockLost;
  }
  ChildProcess child =
      ChildProcess::start(o.command, childEnvironment(guard.lock()));
  if (!child.started()) {
    guard.release();
    return child.exitStatus();
  }
  SupervisorOptions supervision;
  supervision.killAfter = o.killAfter;
  supervision.lockName = lockName;
  supervision.quiet = quiet;
  supervision.beforeMessage = [&global] { announceDatabase(global); };
  if (watch) {
    // SIGKILL lands the keep-alive's margin before the lease could end.
    supervision.stopBy = [&watch, &o, margin] {
      return watch->end() - margin - o.killAfter;
    };
  }
  const Supervised ended =
      superviseCommand(child, loss, signals, guard, supervision);
  // Stopped for want of a renewal: so said even when the keep-alive found
  // the lease lost too meanwhile.
  if (ended == Supervised::UNCONFIRMED) {
    announceDatabase(global);
    fmt::print(stderr,
               "dlmctl: the lease of the lock {} was not renewed in time; "
               "the command was stopped (its status: {})\n",
               lockName, child.exitStatus());
    return kLockLost;
  }
  if (ended != Supervised::ENDED || guard.lost()) {
    announceDatabase(global);
    std::fprintf(stderr,
                 "dlmctl: the lock %s was lost while the command ran; the "
                 "command was stopped (its status: %d)\n",
                 lockName.c_str(), child.exitStatus());
    return kLockLost;
  }
  // Only now: the command and its whole group have ended.
  try {
    if (!guard.release()) {
      announceDatabase(global);
      std::fprintf(stderr,
                   "dlmctl: the lock %s was taken over before release\n",
                   lockName.c_str());
      return kLockLost;
    }
  } catch (const DLMException& e) {
    // The command ended under the lock (the keep-alive had not found it
    // lost): its status is the answer; the lock ends at its TTL.
    if (global.verbosity != Verbosity::QUIET) {
      announceDatabase(global);
      fmt::print(stderr,
                 "dlmctl: warning: releasing the lock {} failed (it ends at "
                 "its TTL): {} [{}]\n",
                 lockName, e.what(), toString(e.code()));
    }
  }
  return child.exitStatus();
}

}  // namespace dlm::cli
