// What the manager tells an application about a lock's holders
// (DistributedLockManager::describeLock, describeHolders): one hold of a
// key, who holds it and until when.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dlm/export.h"
#include "dlm/lock_mode.h"

namespace dlm {

// Wall-clock instants as the store's clock saw them.
using StoreTime = std::chrono::system_clock::time_point;

// Who holds a lock, for operators.
struct DLM_API Holder {
  std::string host;
  std::int64_t pid = 0;
};

// One hold of a key: the row of the lock table for an EXCLUSIVE holder, or
// one SHARED holder of the key.
struct DLM_API LockRecord {
  std::string key;
  // HELD and not yet expired by the store's clock.
  bool held = false;
  // Status HELD (even if expired); an expired row can still be released or
  // extended by its holder until someone else takes it.
  bool statusHeld = false;
  std::string owner;
  std::int64_t fencingToken = 0;
  StoreTime acquiredAt;
  StoreTime expiresAt;
  std::chrono::milliseconds ttl{0};
  Holder holder;
  // The holder's address as the database server saw it (PostgreSQL; empty
  // over a unix socket and on SQLite).
  std::string holderIp;
  LockMode mode = LockMode::EXCLUSIVE;
  // The database login (session_user) whose call made the hold, for
  // operators: filled on PostgreSQL (schema version 17 on) when the caller
  // is in the admin role; empty for everyone else, for holds made before
  // schema 17, and on SQLite (no logins).
  std::string login;
};

}  // namespace dlm
