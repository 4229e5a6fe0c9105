// The two calls that run on the application's own transaction instead of
// the store's connections: commitLock (dlm_release_within) and guardWithin
// (dlm_guard_within). The transaction comes in one of two adapters:
// PostgresTransaction (libpqxx, here) or LibpqTransaction (a PGconn*,
// libpq_app_transaction.h).
#pragma once

#include <string>
#include <string_view>

#include "dlm/app_transaction.h"
#include "dlm/lock_mode.h"
#include "dlm/store_key.h"

namespace dlm::internal {

// Releases the hold inside the application's transaction `tx` (a
// PostgresTransaction or a LibpqTransaction), calling the functions of
// `schema`.
void releaseInAppTransaction(AppTransaction& tx, const std::string& schema,
                             const StoreKey& key, std::string_view token,
                             LockMode mode);

// Checks the hold inside `tx` and row-locks it until `tx` ends.
void guardInAppTransaction(AppTransaction& tx, const std::string& schema,
                           const StoreKey& key, std::string_view token,
                           LockMode mode);

}  // namespace dlm::internal
