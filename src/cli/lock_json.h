// The JSON forms of lock rows and waiters in dlmctl's --json output. Field
// names are part of dlmctl's interface (docs/operations.md): add, never rename.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "dlm/lock_store_admin.h"

namespace dlm::cli {

// One hold (or a free key's row): {"key", "mode": "EXCLUSIVE"|"SHARED",
// "state": "held"|"expired"|"free", "owner", "host", "pid", "ip",
// "fencing_token", "acquired_at", "expires_at", "ttl_ms", "remaining_ms",
// "login", "id", "level", "farm", "client"} with times in ISO 8601 UTC;
// "remaining_ms" is 0 unless held. "login" is the database login that made
// the hold, null when the store did not say (not the admin role, SQLite).
// "key" is the store key; "id", "level" ("DC"|"XDC"), "farm" (null for
// XDC) and "client" are its parts.
nlohmann::json holdJson(const LockRecord& record, StoreTime now);

// holdJson plus "waiters": [...], the requests for this key.
nlohmann::json lockJson(const LockRecord& record, StoreTime now,
                        const std::vector<WaitRecord>& waiters);

// {"key", "mode", "owner", "requested_at", "deadline", "lease_expires_at",
// "waited_ms", "login", "id", "level", "farm", "client"}; "deadline" is
// when the waiter gives up (null: it has none, or did not record it),
// "lease_expires_at" when its request row stops counting unless renewed;
// "login" as for holdJson.
nlohmann::json waiterJson(const WaitRecord& waiter, StoreTime now);

// Milliseconds from `from` to `to`, never negative (the "_ms" fields).
std::int64_t millisBetween(StoreTime from, StoreTime to);

// The text of `value`, indented for people; strings that are not valid
// UTF-8 get U+FFFD for the bad bytes rather than failing.
std::string renderJson(const nlohmann::json& value);

}  // namespace dlm::cli
