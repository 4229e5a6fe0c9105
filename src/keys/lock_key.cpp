// The public face of the key rules (dlm/lock_key.h): the manager's own
// validation and key builder.
#include "dlm/lock_key.h"

#include "keys/key_builder.h"
#include "keys/validation.h"

namespace dlm {

void validateLockId(std::string_view id) { internal::validateLockId(id); }

void validateClientId(std::string_view clientId) {
  internal::validateScopeName("clientId", clientId, /*required=*/true);
}

void validateFarmId(std::string_view farmId, LockLevel level) {
  internal::validateScopeName("farmId", farmId, level == LockLevel::DC);
}

std::string lockKeyPrefix(LockLevel level, const LockKeyScope& scope) {
  return internal::keyPrefix(level, scope);
}

StoreKey lockStoreKey(LockLevel level, const LockKeyScope& scope,
                      const std::string& id) {
  return internal::buildStoreKey(level, scope, id);
}

}  // namespace dlm
