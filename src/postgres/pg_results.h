// Reading the dlm_* functions' results and building their arguments: what
// the PostgreSQL store's call files share.
#pragma once

#include <string>
#include <vector>

#include "dlm/lock_record.h"
#include "dlm/lock_store_admin.h"
#include "dlm/store_key.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {

using Params = std::vector<const char*>;

// Epoch milliseconds in (row, col); NULL reads as the epoch.
StoreTime fromEpochMs(const PgResult& r, int row, int col);

// A row of dlm_describe (withMode false: the row is the EXCLUSIVE state) or
// of dlm_holders (withMode: its 12th column tells SHARED), the login last.
LockRecord toRecord(const PgResult& r, int row, bool withMode);

// A row of dlm_list_waiters.
WaitRecord toWaitRecord(const PgResult& r, int row);

inline const char* sqlBoolean(bool value) { return value ? "true" : "false"; }

// Checks the shape of a one-row, one-column result.
const PgResult& single(const PgResult& r, const char* what);

// Checks that a batch function answered one row per key it was given.
const PgResult& rowPerKey(const PgResult& r, std::size_t keys,
                          const char* what);

// A key's hierarchy as the dlm_* functions take it: the ancestors as a
// text[] literal, the descendant range as two nullable bounds.
struct Hierarchy {
  explicit Hierarchy(const StoreKey& key);
  std::string ancestors;
  const char* descBegin;  // borrowed from the StoreKey
  const char* descEnd;
};

// SQLSTATE lock_not_available: lock_timeout (rowLockWait) expired.
inline constexpr const char* kLockNotAvailable = "55P03";

}  // namespace dlm::internal
