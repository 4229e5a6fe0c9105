// The caps of dlm_limits on SQLite (schema version 5) and the counts they
// are compared with. Callers run these inside their BEGIN IMMEDIATE
// transaction, so a count cannot change before the write it guards.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/store_limits.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// The one row of dlm_limits; the columns' defaults if a DBA deleted it (the
// caps stay in force).
StoreLimits readLimits(Connection& c);

// Live SHARED holds of `key` at `now`, counted up to `cap`.
std::int64_t liveSharedHolds(Connection& c, std::string_view key,
                             std::int64_t now, std::int64_t cap);

// `owner`'s live request rows at `now` for keys other than `key`, counted
// up to `cap` (the owner index: the owner's own rows only).
std::int64_t liveRequestsForOtherKeys(Connection& c, std::string_view owner,
                                      std::string_view key, std::int64_t now,
                                      std::int64_t cap);

}  // namespace dlm::internal::sqlite
