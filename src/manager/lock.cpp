#include "dlm/lock.h"

#include <utility>

namespace dlm {

Lock::Lock(Lock&& other) noexcept
    : id_(std::move(other.id_)),
      clientId_(std::move(other.clientId_)),
      farmId_(std::move(other.farmId_)),
      level_(other.level_),
      mode_(other.mode_),
      key_(std::move(other.key_)),
      manager_(other.manager_),
      acquired_(other.acquired_),
      releasePending_(other.releasePending_),
      owner_(std::move(other.owner_)),
      token_(std::move(other.token_)),
      fencingToken_(other.fencingToken_),
      acquiredAt_(other.acquiredAt_),
      expiresAt_(other.expiresAt_),
      leaseEnd_(other.leaseEnd_) {
  other.clearAcquisition();
  other.manager_ = nullptr;
}

Lock& Lock::operator=(Lock&& other) noexcept {
  if (this != &other) {
    id_ = std::move(other.id_);
    clientId_ = std::move(other.clientId_);
    farmId_ = std::move(other.farmId_);
    level_ = other.level_;
    mode_ = other.mode_;
    key_ = std::move(other.key_);
    manager_ = other.manager_;
    acquired_ = other.acquired_;
    releasePending_ = other.releasePending_;
    owner_ = std::move(other.owner_);
    token_ = std::move(other.token_);
    fencingToken_ = other.fencingToken_;
    acquiredAt_ = other.acquiredAt_;
    expiresAt_ = other.expiresAt_;
    leaseEnd_ = other.leaseEnd_;
    other.clearAcquisition();
    other.manager_ = nullptr;
  }
  return *this;
}

void Lock::clearAcquisition() {
  acquired_ = false;
  releasePending_ = false;
  owner_.clear();
  token_.clear();
  fencingToken_ = 0;
  acquiredAt_ = StoreTime{};
  expiresAt_ = StoreTime{};
  leaseEnd_ = {};
}

}  // namespace dlm
