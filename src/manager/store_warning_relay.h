// Turns a store's warnings (LockStore::addWarningListener) into the
// manager's STORE_WARNING events, for as long as the relay lives.
#pragma once

#include <string_view>

#include "dlm/lock_store.h"

namespace dlm::internal {

class Telemetry;

class StoreWarningRelay final : public StoreWarningListener {
 public:
  // Listens to `store` from now on; both must outlive the relay.
  StoreWarningRelay(LockStore& store, Telemetry& telemetry);
  ~StoreWarningRelay() override;
  StoreWarningRelay(const StoreWarningRelay&) = delete;
  StoreWarningRelay& operator=(const StoreWarningRelay&) = delete;

  void storeWarning(std::string_view message) override;

 private:
  LockStore& store_;
  Telemetry& telemetry_;
};

}  // namespace dlm::internal
