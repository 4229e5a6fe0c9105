// Builds store keys from (level, farm, client, id) and the hierarchy rules.
#pragma once

#include <string>

#include "dlm/lock.h"
#include "dlm/lock_key.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

// The public scope (dlm/lock_key.h), under the name the manager uses.
using KeyScope = LockKeyScope;

// The scope prefix every key of (level, scope) starts with:
// "DC#<farmId>#<clientId>#" or "XDC#<clientId>#".
std::string keyPrefix(LockLevel level, const KeyScope& scope);

// The StoreKey for `id` (already validated by validateLockId). With hierarchy,
// throws INVALID_ARGUMENT for an empty segment (".a", "a..b", "a.").
StoreKey buildStoreKey(LockLevel level, const KeyScope& scope,
                       const std::string& id);

}  // namespace dlm::internal
