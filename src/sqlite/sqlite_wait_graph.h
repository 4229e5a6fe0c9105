// SqliteStore::registerWait, unregisterWait and cancelRequests' transactions: request rows
// and the wait-for graph walk with modes and queue edges.
#pragma once

#include <optional>
#include <string_view>

#include "dlm/lock_store.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// In one BEGIN IMMEDIATE transaction (serialised with every other
// registration on the file): deletes expired request rows, follows the
// wait-for graph from the request and records the request row unless the
// walk leads back to its owner. A request waits for the owners of live holds
// that conflict with it and for the owners of older live requests of other
// owners that conflict with it (queue order: requested_at_ms, then owner).
WaitRegistration registerWaitIn(Connection& c, const WaitRequest& request);

// Deletes `owner`'s request row for `key`. True when live requests of other
// owners that conflict with it remain on its path: they may have been held
// back by it and should be woken.
bool unregisterWaitIn(Connection& c, std::string_view key,
                      std::string_view owner);

// The operator's cancelRequests: deletes the request rows of exactly `key`
// (only `owner`'s when given), expired ones included. How many it deleted.
int cancelRequestsIn(Connection& c, std::string_view key,
                     std::optional<std::string_view> owner);

}  // namespace dlm::internal::sqlite
