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

// The contention scenario's timing with a bounded call time: faults are
// expected, so retries are quick and every call has its budget.
inline LockConfiguration workerConfiguration(
    std::chrono::milliseconds operationTimeout) {
  LockConfiguration c = contention::scenarioConfiguration();
  c.lockTtl = kWorkerTtl;
  c.storeRetries = 8;
  c.storeRetryBackoff = std::chrono::milliseconds(20);
  c.operationTimeout = operationTimeout;
  return c;
}

}  // namespace dlm::test::faults
