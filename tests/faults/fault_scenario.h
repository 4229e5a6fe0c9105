// Settings shared by the fault tests and their worker processes.
#pragma once

#include <chrono>

#include "contention/scenario.h"
#include "dlm/lock_configuration.h"

namespace dlm::test::faults {

// Short enough that an acquire whose reply was lost (held in the store, not
// known to the client) frees its key within the run; long enough that no
// ordinary hold (2 ms) comes near it.
inline constexpr std::chrono::milliseconds kWorkerTtl{5000};
inline constexpr std::chrono::milliseconds kWorkerAcquireTimeout{500};

// The contention scenario's waiting, with the library's default store
// retries (3, from 50 ms): what an application gets, and short enough that
// a restart outlasts them, so errors do reach the callers and their codes
// and the recovery after them are tested, not hidden by generous retries.
inline LockConfiguration workerConfiguration(
    std::chrono::milliseconds operationTimeout) {
  const LockConfiguration defaults;
  LockConfiguration c = contention::scenarioConfiguration();
  c.lockTtl = kWorkerTtl;
  c.storeRetries = defaults.storeRetries;
  c.storeRetryBackoff = defaults.storeRetryBackoff;
  c.operationTimeout = operationTimeout;
  return c;
}

}  // namespace dlm::test::faults
