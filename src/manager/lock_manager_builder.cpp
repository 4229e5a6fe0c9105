// DistributedLockManager::Builder: validates the settings and builds.
#include <utility>

#include "dlm/lock_manager.h"
#include "keys/validation.h"
#include "manager/manager_impl.h"

namespace dlm {

using Builder = DistributedLockManager::Builder;

DistributedLockManager::Builder DistributedLockManager::builder() {
  return Builder();
}

Builder& Builder::clientId(std::string clientId) {
  clientId_ = std::move(clientId);
  return *this;
}
Builder& Builder::farmId(std::string farmId) {
  farmId_ = std::move(farmId);
  return *this;
}
Builder& Builder::store(std::shared_ptr<LockStore> store) {
  store_ = std::move(store);
  return *this;
}
Builder& Builder::configuration(LockConfiguration configuration) {
  config_ = configuration;
  return *this;
}
Builder& Builder::separator(char separator) {
  separator_ = separator;
  return *this;
}
Builder& Builder::hierarchy(bool enabled) {
  hierarchy_ = enabled;
  return *this;
}
Builder& Builder::applyMigrations(bool apply) {
  applyMigrations_ = apply;
  return *this;
}
Builder& Builder::clock(std::shared_ptr<Clock> clock) {
  clock_ = std::move(clock);
  return *this;
}
Builder& Builder::events(std::shared_ptr<LockEventHandler> handler) {
  events_ = std::move(handler);
  return *this;
}

std::unique_ptr<DistributedLockManager> Builder::build() {
  internal::validateScopeName("clientId", clientId_, /*required=*/true);
  internal::validateScopeName("farmId", farmId_, /*required=*/false);
  if (!store_) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "no store given");
  }
  config_.validate();
  // Printable ASCII keeps separator + 1 (the end of the descendant range) a
  // byte that sorts right after it.
  if (separator_ < 0x21 || separator_ > 0x7E || separator_ == '#') {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "separator must be printable ASCII other than '#'");
  }
  internal::ManagerSettings settings;
  settings.clientId = clientId_;
  settings.farmId = farmId_;
  settings.separator = separator_;
  settings.hierarchy = hierarchy_;
  settings.applyMigrations = applyMigrations_;
  settings.config = config_;
  settings.store = store_;
  settings.clock = clock_ ? clock_ : Clock::system();
  settings.events = events_;
  // The constructor is private, so make_unique cannot reach it.
  return std::unique_ptr<DistributedLockManager>(
      new DistributedLockManager(std::make_unique<Impl>(std::move(settings))));
}

}  // namespace dlm
