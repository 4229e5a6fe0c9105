// The two calls that run on the application's own SQLite connection instead
// of the store's: commitLock (an UPDATE or DELETE of the hold) and
// guardWithin (a SELECT of it), each in the application's open transaction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "dlm/app_transaction.h"
#include "dlm/lock_mode.h"

struct sqlite3;

namespace dlm::internal::sqlite {

// The application's connection behind `tx`: a SqliteTransaction with a
// transaction open on the store's file `storeFile` (canonical, as
// canonicalFile gives it). INVALID_ARGUMENT otherwise, naming `call` and the
// store's `path`.
sqlite3* appConnection(AppTransaction& tx, std::string_view call,
                       const std::string& path, const std::string& storeFile);

// In the application's transaction on `db`: frees the hold `token` has on
// `key` in `mode` (expired but not taken over counts); false when it has
// none.
bool releaseOnAppConnection(sqlite3* db, const std::string& path,
                            std::string_view key, std::string_view token,
                            LockMode mode, std::int64_t nowMs);

// In the application's transaction on `db`: whether `token` holds `key` in
// `mode` with a lease that ends after nowMs. Reads only.
bool holdsOnAppConnection(sqlite3* db, const std::string& path,
                          std::string_view key, std::string_view token,
                          LockMode mode, std::int64_t nowMs);

// Rolls the application's transaction on `db` back, so its COMMIT fails
// ("no transaction is active") instead of committing work done without the
// lock, and throws LOCK_NOT_HELD for `key`.
[[noreturn]] void refuseAppTransaction(sqlite3* db, const std::string& path,
                                       std::string_view key,
                                       std::string_view why);

}  // namespace dlm::internal::sqlite
