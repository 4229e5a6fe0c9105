// SqliteStore::release's work on one hold, in either mode: a conditional
// UPDATE (EXCLUSIVE) or DELETE (SHARED) keyed by the acquisition's token.
#pragma once

#include <string_view>

#include "dlm/lock_mode.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

struct ReleaseDone {
  // release()'s answer: this token's hold is released (EXCLUSIVE: also when
  // it was already; SHARED: only when this call deleted it).
  bool released = false;
  // This call freed the hold: its waiters are to be woken (after COMMIT).
  bool freed = false;
};

// Frees `token`'s hold on `key` in `mode`, inside the caller's open write
// transaction (BEGIN IMMEDIATE), which the caller commits.
ReleaseDone releaseWithin(Connection& c, std::string_view key,
                          std::string_view token, LockMode mode);

// releaseWithin in a transaction of its own, committed lazily (a release
// lost on power loss only keeps the lock until its TTL).
ReleaseDone releaseIn(Connection& c, std::string_view key,
                      std::string_view token, LockMode mode);

}  // namespace dlm::internal::sqlite
