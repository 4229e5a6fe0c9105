// SqliteStore::purgeIdle's work: counting (a dry run) or deleting one batch
// of idle rows, ended requests and stale SHARED holds, and raising the
// fencing floor past the tokens of the key rows it deletes.
#pragma once

#include <chrono>

#include "dlm/lock_store_admin.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// What a purge now would delete, up to `batchSize`, and the fencing floor as
// it is. One statement, one snapshot, no write lock. The caller checked
// idleFor >= 0 and batchSize > 0.
PurgeBatch countIdleIn(Connection& c, std::chrono::milliseconds idleFor,
                       int batchSize);

// Deletes one batch in one BEGIN IMMEDIATE transaction (durable): ended
// request rows first, then stale SHARED holds, then idle key rows up to
// what is left of `batchSize`, after raising the fencing floor above their
// tokens. The caller checked the arguments as for countIdleIn.
PurgeBatch purgeIdleIn(Connection& c, std::chrono::milliseconds idleFor,
                       int batchSize);

}  // namespace dlm::internal::sqlite
