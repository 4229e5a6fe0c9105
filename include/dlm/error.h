// Errors raised by the dlm API.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "dlm/export.h"

namespace dlm {

// What went wrong, classified by what the caller should do next.
enum class ErrorCode {
  // The lock is held by someone else (tryAcquireLock), or could not be taken
  // before the timeout (acquireLock), or a second acquire through a Lock that
  // is already held.
  LOCK_UNAVAILABLE,
  // The store could not be reached (connection refused or lost) and the
  // configured store retries did not help. A server that refuses the login
  // itself is PERMISSION_DENIED.
  CONNECTION_ERROR,
  // A transient store failure (serialization failure, deadlock between
  // store transactions, SQLITE_BUSY) persisted through every configured retry.
  RETRIES_EXHAUSTED,
  // Applying the schema from code (the builder's opt-in) failed.
  TABLE_CREATION_ERROR,
  // Anything else; the message carries the SQLSTATE or SQLite code.
  INTERNAL_ERROR,
  // The caller passed something invalid. Raised before any I/O where the
  // library can tell; a limit of the database (dlm_limits) or a role that
  // does not exist is found by the database.
  INVALID_ARGUMENT,
  // The database schema is missing or at another version; the message names
  // the migration to apply.
  SCHEMA_MISMATCH,
  // Waiting would deadlock: the wait-for graph leads back to the caller's
  // owner (acquireLock).
  DEADLOCK_DETECTED,
  // The lock is not held by the caller (lost to expiry and takeover).
  LOCK_NOT_HELD,
  // The database refused the call: the login lacks a privilege it needs
  // (PostgreSQL SQLSTATE 42501; e.g. an admin call without dlm_admin), or
  // refused the login itself when connecting (28P01: a wrong or missing
  // password; 28000: no pg_hba.conf entry, a role that does not exist or may
  // not log in). The message says what was refused, never the password. Not
  // transient: not retried.
  PERMISSION_DENIED,
};

// "LOCK_UNAVAILABLE", ...
DLM_API std::string_view toString(ErrorCode code);

// The one exception type of the API. what() names the lock (when there is
// one) and the cause.
class DLM_API DLMException : public std::runtime_error {
 public:
  // `transient` marks store failures that may succeed when retried
  // (connection loss, serialization failure, busy); the manager retries those
  // within LockConfiguration::storeRetries.
  DLMException(ErrorCode code, const std::string& message,
               bool transient = false);

  ErrorCode code() const noexcept { return code_; }
  bool transient() const noexcept { return transient_; }

 private:
  ErrorCode code_;
  bool transient_;
};

}  // namespace dlm
