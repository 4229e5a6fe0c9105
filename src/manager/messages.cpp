#include "manager/messages.h"

#include <fmt/format.h>

namespace dlm::internal {

std::string lockName(const Lock& lock) {
  return fmt::format("lock '{}'", lock.key());
}

std::string releaseBlockedByAppTransaction(const Lock& lock,
                                           const std::string& cause) {
  return fmt::format(
      "{}: the release waits for the application transaction that "
      "commitLock released the lock in, and cannot go through while that "
      "transaction is open (it keeps the lock's row, on SQLite the "
      "database's write lock, until it ends): commit or roll back the "
      "application transaction first, then call rollbackLock again (after a "
      "commit the lock is already free; after a rollback this releases it); "
      "the lock is still held: {}",
      lockName(lock), cause);
}

std::string blockedMessage(const Lock& lock, const std::string& blockedBy,
                           bool queued) {
  if (queued) {
    return fmt::format(
        "{} is not held by anyone in its way, but an earlier waiter for '{}' "
        "is queued and goes first (fair queueing)",
        lockName(lock), blockedBy);
  }
  if (blockedBy.empty() || blockedBy == lock.storeKey()) {
    return fmt::format("{} is held by someone else", lockName(lock));
  }
  return fmt::format("{} is blocked by the held lock '{}'", lockName(lock),
                     blockedBy);
}

std::string describeCycle(const std::vector<std::string>& cycle) {
  std::string out;
  for (const auto& key : cycle) {
    out += fmt::format("'{}' (whose holder waits for) ", key);
  }
  return out + "a lock this thread's owner holds";
}

LockEvent lockEvent(LockEventKind kind, const Lock& lock) {
  LockEvent event;
  event.kind = kind;
  event.lockId = lock.lockId();
  event.key = lock.storeKey();
  event.mode = lock.lockMode();
  event.fencingToken = lock.fencingToken();
  return event;
}

bool isStoreFailure(const DLMException& e) {
  switch (e.code()) {
    case ErrorCode::CONNECTION_ERROR:
    case ErrorCode::RETRIES_EXHAUSTED:
    case ErrorCode::INTERNAL_ERROR:
    case ErrorCode::SCHEMA_MISMATCH:
    case ErrorCode::TABLE_CREATION_ERROR:
    case ErrorCode::PERMISSION_DENIED:
      return true;
    default:
      return e.transient();
  }
}

}  // namespace dlm::internal
