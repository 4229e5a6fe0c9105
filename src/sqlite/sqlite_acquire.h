// SqliteStore::tryAcquire's transaction, in either mode: the row protocol of
// docs/guide.md "Shared locks and fair queueing" in one BEGIN IMMEDIATE transaction
// (the file's write lock serialises every writer, so no row locks needed).
#pragma once

#include <cstdint>

#include "dlm/lock_store.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// One attempt, committed before it returns (durably when it grants). A
// granted fencing token is above `tokenFloor` too (the store's floor after
// it lost a file; 0 before).
AcquireResult acquireIn(Connection& c, const AcquireRequest& request,
                        std::int64_t tokenFloor);

}  // namespace dlm::internal::sqlite
