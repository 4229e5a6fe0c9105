// SqliteStore::tryAcquire's transaction, in either mode: the row protocol of
// docs/guide.md "Shared locks and fair queueing" in one BEGIN IMMEDIATE
// transaction (the file's write lock serialises every writer, so no row locks
// needed).
#pragma once

#include <cstdint>

#include "dlm/lock_store.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// One attempt inside the caller's open write transaction (BEGIN
// IMMEDIATE), which the caller commits, whatever the answer (the rows made
// for a refused attempt stay, as they do after a single call). A granted
// fencing token is above `tokenFloor` too (the store's floor after it lost
// a file; 0 before). INVALID_ARGUMENT over a cap of dlm_limits: the caller
// rolls back what the attempt wrote (its transaction, or its savepoint).
AcquireResult acquireWithin(Connection& c, const AcquireRequest& request,
                            std::int64_t tokenFloor);

// acquireWithin in a transaction of its own, committed durably before it
// returns.
AcquireResult acquireIn(Connection& c, const AcquireRequest& request,
                        std::int64_t tokenFloor);

}  // namespace dlm::internal::sqlite
