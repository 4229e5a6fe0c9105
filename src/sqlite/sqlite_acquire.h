// SqliteStore::tryAcquire's transaction, in either mode: the row protocol of
// docs/guide.md "Shared locks and fair queueing" in one BEGIN IMMEDIATE transaction
// (the file's write lock serialises every writer, so no row locks needed).
#pragma once

#include "dlm/lock_store.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// One attempt, committed before it returns (durably when it grants).
AcquireResult acquireIn(Connection& c, const AcquireRequest& request);

}  // namespace dlm::internal::sqlite
