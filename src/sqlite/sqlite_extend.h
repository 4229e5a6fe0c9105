// SqliteStore::extend's work on one hold, in either mode: a new expiry for
// the hold `token` still has.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dlm/lock_mode.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// Inside the caller's open write transaction (BEGIN IMMEDIATE), which the
// caller commits: sets the hold's expiry to now + ttl while `token` holds
// `key` in `mode` (expired but not taken over counts). The new expiry in
// ms, or nullopt when the hold is gone. INVALID_ARGUMENT, with nothing
// written, when ttl is over dlm_limits.max_ttl_ms.
std::optional<std::int64_t> extendWithin(Connection& c, std::string_view key,
                                         std::string_view token,
                                         std::chrono::milliseconds ttl,
                                         LockMode mode);

// extendWithin in a transaction of its own, committed durably.
std::optional<std::int64_t> extendIn(Connection& c, std::string_view key,
                                     std::string_view token,
                                     std::chrono::milliseconds ttl,
                                     LockMode mode);

}  // namespace dlm::internal::sqlite
