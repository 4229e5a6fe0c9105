// The words and events the manager reports with: lock names for messages,
// why an attempt was refused, the lock fields of an event, and which store
// failures count as the store failing.
#pragma once

#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock.h"
#include "dlm/lock_events.h"

namespace dlm::internal {

// "lock 'DC#farm#client#id'": the lock's canonical key (Lock::key()).
std::string lockName(const Lock& lock);

// Why an attempt on `lock` was refused, for LOCK_UNAVAILABLE messages.
std::string blockedMessage(const Lock& lock, const std::string& blockedBy,
                           bool queued);

// Why a release after commitLock(lock, tx) could not run: the application
// transaction `tx` is still open (`cause`: the store's error).
std::string releaseBlockedByAppTransaction(const Lock& lock,
                                           const std::string& cause);

// "'k1' (whose holder waits for) ... a lock this thread's owner holds".
std::string describeCycle(const std::vector<std::string>& cycle);

// An event of `kind` about `lock`: its names, mode and fencing token.
LockEvent lockEvent(LockEventKind kind, const Lock& lock);

// Whether `e`, thrown by a store call, is the store failing (counted and
// reported as STORE_ERROR) rather than an answer about a lock.
bool isStoreFailure(const DLMException& e);

}  // namespace dlm::internal
