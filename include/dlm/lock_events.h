// What a lock manager reports as it works: acquisitions, waits and who
// blocks them, releases, leases renewed and lost, deadlocks, store errors
// and reconnections. Give a handler to the builder
// (DistributedLockManager::Builder::events).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/export.h"
#include "dlm/lock_mode.h"

namespace dlm {

enum class LockEventKind {
  ACQUIRED,           // a lock was acquired
  WAITING,            // acquireLock waits: when it starts, then every
                      // LockConfiguration::waitingReportInterval
  RELEASED,           // a held lock was released (releaseLock/rollbackLock)
  LEASE_RENEWED,      // a LockGuard's keep-alive extended its lease
  LEASE_LOST,         // a LockGuard's lease is judged lost
  DEADLOCK,           // acquireLock found a cycle and threw
  STORE_ERROR,        // a store call failed (each failure: retries, renewals)
  STORE_RECONNECTED,  // the store replaced a dead connection with a new one
  RELEASE_FAILED,     // a release the library made on its own (a LockGuard's
                      // or ClusteredLockService's destructor) threw; the
                      // lock is released by token later or expires
  STORE_WARNING,      // the store warns of a condition that fails nothing
                      // (PostgreSQL: acquires not waiting for a standby
                      // under SynchronousReplication::WARN; a clientId
                      // bound at first use to the login's role, once, by
                      // the acquire or wait that bound it, schema 17)
};

// "ACQUIRED", "WAITING", ...
DLM_API std::string_view toString(LockEventKind kind);

// Who is in the way of a waiter, as the store last said.
struct DLM_API LockBlocker {
  std::string key;      // the store key held (or queued for)
  bool queued = false;  // an older waiter's request, not a hold
  // The holder, when the key is held and the store could say (empty / 0
  // otherwise).
  std::string owner;
  std::string host;
  std::int64_t pid = 0;
  LockMode mode = LockMode::EXCLUSIVE;
  std::optional<std::chrono::system_clock::time_point> since;  // acquired at
};

struct DLM_API LockEvent {
  LockEventKind kind = LockEventKind::ACQUIRED;
  // When it happened (the application's clock).
  std::chrono::system_clock::time_point at;
  std::string clientId;
  // The lock: lockId as Lock::lockId() ("clientA#orders.42") and key, its
  // canonical name (Lock::key(): "DC#farm1#clientA#orders.42"), which the
  // event log shows; both empty for store events.
  std::string lockId;
  std::string key;
  LockMode mode = LockMode::EXCLUSIVE;
  // ACQUIRED, RELEASED, LEASE_RENEWED, LEASE_LOST: the acquisition's.
  std::int64_t fencingToken = 0;
  // ACQUIRED: from the call's start to the acquisition; WAITING: so far.
  std::chrono::milliseconds waited{0};
  // ACQUIRED, WAITING: store attempts made so far in this call.
  int attempts = 0;
  // RELEASED, LEASE_LOST: since the acquisition.
  std::chrono::milliseconds heldFor{0};
  // WAITING: what blocks the lock (nullopt when the store did not say).
  std::optional<LockBlocker> blocker;
  // DEADLOCK: the keys of the cycle, starting with the wanted key (see
  // WaitRegistration::deadlockCycle).
  std::vector<std::string> cycle;
  // STORE_ERROR: the failure (message without passwords).
  // STORE_RECONNECTED: code CONNECTION_ERROR, message saying which
  // connection.
  // RELEASE_FAILED: the release's error (INTERNAL_ERROR for an exception
  // that is no DLMException) and its message.
  // STORE_WARNING: the store's message (code left INTERNAL_ERROR, unused).
  ErrorCode code = ErrorCode::INTERNAL_ERROR;
  std::string message;
};

// Receives a manager's events. onEvent is called on the thread where the
// event happened (a lock call's, the keep-alive thread, the store's
// listening thread), never while the library holds a lock of its own, so it
// may call the manager; it should return quickly, since the lock call waits
// for it. An exception it throws is caught and dropped: it never breaks or
// changes the call that reported the event. May be called from several
// threads at once.
class DLM_API LockEventHandler {
 public:
  virtual ~LockEventHandler() = default;
  virtual void onEvent(const LockEvent& event) = 0;
};

// One line for `event`, without a trailing newline, e.g.
//   2026-11-24T21:30:00.123Z dlm ACQUIRED client=app lock=app#orders.42
//   mode=EXCLUSIVE fencing=17 waited_ms=3 attempts=1
// key=value fields; values with spaces or quotes are double-quoted with
// backslash escapes.
DLM_API std::string formatEvent(const LockEvent& event);

// How urgent an event is, in syslog(3) terms: LEASE_LOST, DEADLOCK,
// STORE_ERROR, RELEASE_FAILED and STORE_WARNING are warnings (4), the rest
// informational (6).
DLM_API int severityOf(const LockEvent& event);

// A handler that writes formatEvent(event) and '\n' to `out`, one whole line
// at a time (serialised between threads). `out` must outlive the handler.
DLM_API std::shared_ptr<LockEventHandler> makeStreamEventHandler(std::ostream& out);

// A handler that calls `sink(severityOf(event), formatEvent(event))`: the
// shape of syslog(3) and of most application loggers.
DLM_API std::shared_ptr<LockEventHandler> makeLineEventHandler(
    std::function<void(int severity, const std::string& line)> sink);

}  // namespace dlm
