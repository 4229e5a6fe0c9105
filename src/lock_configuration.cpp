#include "dlm/lock_configuration.h"

#include "dlm/error.h"
#include "validation.h"

namespace dlm {

void LockConfiguration::validate() const {
  internal::requirePositive("lockTtl", lockTtl);
  internal::requireNonNegative("waitForLock", waitForLock);
  internal::requirePositive("sleepBetweenRetries", sleepBetweenRetries);
  if (storeRetries < 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "storeRetries must not be negative");
  }
  internal::requirePositive("storeRetryBackoff", storeRetryBackoff);
}

}  // namespace dlm
