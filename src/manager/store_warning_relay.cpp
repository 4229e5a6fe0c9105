#include "manager/store_warning_relay.h"

#include <string>

#include "dlm/lock_events.h"
#include "telemetry/telemetry.h"

namespace dlm::internal {

StoreWarningRelay::StoreWarningRelay(LockStore& store, Telemetry& telemetry)
    : store_(store), telemetry_(telemetry) {
  store_.addWarningListener(this);
}

StoreWarningRelay::~StoreWarningRelay() { store_.removeWarningListener(this); }

void StoreWarningRelay::storeWarning(std::string_view message) {
  if (!telemetry_.reporting()) return;
  LockEvent event;
  event.kind = LockEventKind::STORE_WARNING;
  event.message = std::string(message);
  telemetry_.emit(event);
}

}  // namespace dlm::internal
