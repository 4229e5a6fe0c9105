// A lock handle: names one lock and carries the state of its acquisition.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dlm/export.h"
#include "dlm/lock_mode.h"
#include "dlm/lock_record.h"
#include "dlm/store_key.h"

namespace dlm {

// DC: scoped to the manager's farm ("DC#<farmId>#<clientId>#<id>").
// XDC: across farms ("XDC#<clientId>#<id>"). A DC and an XDC lock with the
// same id are different locks and never block each other.
enum class LockLevel { DC, XDC };

// The defaults a manager and dlmctl share: a lock taken without a level is
// DC, and a manager built without a farmId (dlmctl without --farm) is in
// farm "default". So `getLockInstance("nightly.import")` of client
// "billing" is DC#default#billing#nightly.import, the lock
// `dlmctl --client billing show nightly.import` looks at.
inline constexpr LockLevel kDefaultLockLevel = LockLevel::DC;
inline constexpr const char* kDefaultFarmId = "default";

// Returned by DistributedLockManager::getLockInstance (no I/O). Movable, not
// copyable; a Lock is used by one thread at a time. A moved-from Lock holds
// nothing. isAcquired() is this handle's own view: a lock that expired and was
// taken by someone else still reads as acquired until releaseLock says false.
class LockGuard;

class DLM_API Lock {
 public:
  Lock(Lock&& other) noexcept;
  Lock& operator=(Lock&& other) noexcept;
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  ~Lock() = default;

  // The lock's one printed name, its canonical key: "DC#<farmId>#<clientId>#
  // <id>" or "XDC#<clientId>#<id>" (every coordinate: level, farm where it
  // has one, client, id). Messages, events, dlmctl's output and the docs
  // show it; dlmctl show|release|exec take it as printed.
  const std::string& key() const { return key_.key; }
  // "<clientId>#<id>": the name of the clustered-locking API this library
  // follows, kept for it; it leaves out the level and the farm, so two
  // different locks can share it. Show key() instead.
  std::string lockId() const { return clientId_ + "#" + id_; }
  // The id the caller passed to getLockInstance.
  const std::string& id() const { return id_; }
  const std::string& clientId() const { return clientId_; }
  // The manager's farm (also for XDC locks, whose key ignores it).
  const std::string& farmId() const { return farmId_; }
  LockLevel lockLevel() const { return level_; }
  LockMode lockMode() const { return mode_; }
  // The key in the lock table: key().
  const std::string& storeKey() const { return key_.key; }

  bool isAcquired() const { return acquired_; }
  // After commitLock: the release waits for the application transaction's
  // commit. rollbackLock (or releaseLock) frees the lock if that transaction
  // rolled back. isAcquired() is false meanwhile.
  bool isReleasePending() const { return releasePending_; }
  // Valid while isAcquired(): the owner GUID recorded on the row, the
  // acquisition's fencing token, and the store-clock instants (expiresAt
  // follows extendLock; a LockGuard's keep-alive renewals show in
  // LockGuard::expiresAt instead).
  //
  // The fencing token grows by one with every acquisition of the key, so a
  // downstream system can refuse writes from a holder whose lock expired and
  // was taken over: send the token with each write and have the system keep
  // the highest token it has seen, rejecting smaller ones (see docs/guide.md).
  const std::string& owner() const { return owner_; }
  std::int64_t fencingToken() const { return fencingToken_; }
  StoreTime acquiredAt() const { return acquiredAt_; }
  StoreTime expiresAt() const { return expiresAt_; }

 private:
  friend class DistributedLockManager;
  friend class LockGuard;
  Lock() = default;

  void clearAcquisition();

  std::string id_;
  std::string clientId_;
  std::string farmId_;
  LockLevel level_ = LockLevel::DC;
  LockMode mode_ = LockMode::EXCLUSIVE;
  StoreKey key_;
  const void* manager_ = nullptr;  // identity of the creating manager

  bool acquired_ = false;
  bool releasePending_ = false;
  std::string owner_;
  std::string token_;
  std::int64_t fencingToken_ = 0;
  StoreTime acquiredAt_;
  StoreTime expiresAt_;
  // When the lease ends by this process's steady clock, conservatively: the
  // start of the store call that acquired (or last extended) it plus its
  // TTL; the store's expiry is never earlier.
  std::chrono::steady_clock::time_point leaseEnd_{};
};

}  // namespace dlm
