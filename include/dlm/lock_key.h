// Lock ids and the store keys they name: the rules a DistributedLockManager
// applies, for tools that name locks the way managers do (dlmctl). No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "dlm/export.h"
#include "dlm/lock.h"
#include "dlm/lock_store.h"

namespace dlm {

inline constexpr std::size_t kMaxLockIdBytes = 1024;
inline constexpr std::size_t kMaxScopeNameBytes = 255;

// Throws DLMException(INVALID_ARGUMENT) with a message naming the problem
// unless `id` is non-empty, at most kMaxLockIdBytes, free of NUL bytes and
// valid UTF-8 (both stores accept exactly these ids).
DLM_API void validateLockId(std::string_view id);

// The same for a client id: non-empty, at most kMaxScopeNameBytes, no NUL
// or '#' (the key separator), valid UTF-8. The message names "clientId".
DLM_API void validateClientId(std::string_view clientId);

// The same for a farm id, which may be empty unless `level` is DC (XDC keys
// leave the farm out). The message names "farmId".
DLM_API void validateFarmId(std::string_view farmId, LockLevel level);

// Whose keys: a manager's farm and client, and its hierarchy settings
// (DistributedLockManager's builder: separator, hierarchy).
struct DLM_API LockKeyScope {
  std::string farmId;
  std::string clientId;
  char separator = '.';
  bool hierarchy = true;
};

// The prefix every key of (level, scope) starts with:
// "DC#<farmId>#<clientId>#" or "XDC#<clientId>#".
DLM_API std::string lockKeyPrefix(LockLevel level, const LockKeyScope& scope);

// The StoreKey a manager of `scope` uses for `id` at `level`: the scoped key
// and, with hierarchy, its ancestors and descendant range. Validates nothing
// but the segments: call validateLockId / validateClientId / validateFarmId
// first. With hierarchy, throws INVALID_ARGUMENT for an empty segment
// (".a", "a..b", "a.").
DLM_API StoreKey lockStoreKey(LockLevel level, const LockKeyScope& scope,
                      const std::string& id);

}  // namespace dlm
