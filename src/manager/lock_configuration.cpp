#include "dlm/lock_configuration.h"

#include "dlm/error.h"
#include "keys/validation.h"
#include "manager/keep_alive.h"

namespace dlm {

void LockConfiguration::validate() const {
  internal::requirePositive("lockTtl", lockTtl);
  internal::requireNonNegative("waitForLock", waitForLock);
  internal::requirePositive("sleepBetweenRetries", sleepBetweenRetries);
  if (storeRetries < 0 || storeRetries > kMaxStoreRetries) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "storeRetries must be between 0 and 1000");
  }
  internal::requirePositive("storeRetryBackoff", storeRetryBackoff);
  if (storeRetryBackoff > kMaxRetryBackoff) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "storeRetryBackoff must be at most one minute");
  }
  internal::requirePositive("operationTimeout", operationTimeout);
  internal::requirePositive("waitingReportInterval", waitingReportInterval);
  if (operationTimeout > kMaxOperationTimeout) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "operationTimeout must be at most one hour");
  }
  if (maxBatchSize < 1 || maxBatchSize > kMaxBatchSize) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "maxBatchSize must be between 1 and 1000");
  }
  if (maxBatchesInFlight < 1 || maxBatchesInFlight > kMaxBatchesInFlight) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "maxBatchesInFlight must be between 1 and 64");
  }
  // Written so that NaN fails too.
  if (!(retryJitter >= 0.0 && retryJitter <= 0.5)) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "retryJitter must be between 0 and 0.5");
  }
}

std::chrono::milliseconds keepAliveLossMargin(std::chrono::milliseconds ttl) {
  return internal::lossMargin(ttl);
}

}  // namespace dlm
