#include "manager/store_retry.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "manager/messages.h"
#include "telemetry/telemetry.h"

namespace dlm::internal {

using std::chrono::milliseconds;

StoreRetry::StoreRetry(LockStore& store, Clock& clock,
                       const LockConfiguration& config, Telemetry& telemetry)
    : store_(store),
      clock_(clock),
      config_(config),
      telemetry_(telemetry),
      seenReconnections_(store.reconnections()) {}

void StoreRetry::pauseOrGiveUp(const DLMException& e, const Lock* lock,
                               Deadline deadline, int retry,
                               milliseconds& backoff) {
  if (isStoreFailure(e)) reportStoreError(e);
  // Rethrows the exception being handled by run(), unchanged.
  if (!e.transient()) throw;
  const milliseconds left = timeLeft(deadline);
  if (retry >= config_.storeRetries || left <= milliseconds::zero()) {
    const ErrorCode code = e.code() == ErrorCode::CONNECTION_ERROR
                               ? ErrorCode::CONNECTION_ERROR
                               : ErrorCode::RETRIES_EXHAUSTED;
    const std::string subject =
        lock != nullptr ? lockName(*lock) : std::string("lock manager");
    const std::string why =
        left <= milliseconds::zero()
            ? fmt::format(
                  "no answer within the operation timeout of {} ms ({} "
                  "retries)",
                  config_.operationTimeout.count(), retry)
            : fmt::format("failed after {} retries", retry);
    throw DLMException(code, fmt::format("{}: {} store call {}: {}", subject,
                                         store_.name(), why, e.what()));
  }
  clock_.sleepFor(std::min(backoff, left));
  const milliseconds maxPause =
      std::max(config_.storeRetryBackoff, LockConfiguration::kMaxRetryPause);
  backoff = std::min(backoff * 2, maxPause);
}

void StoreRetry::reportStoreError(const DLMException& e) {
  telemetry_.storeFailed(e);
}

void StoreRetry::checkReconnections() noexcept try {
  const std::uint64_t now = store_.reconnections();
  std::uint64_t seen = seenReconnections_.load(std::memory_order_relaxed);
  while (now > seen) {
    if (!seenReconnections_.compare_exchange_weak(seen, now)) continue;
    for (std::uint64_t i = seen; i < now; ++i) telemetry_.reconnected();
    if (telemetry_.reporting()) {
      LockEvent event;
      event.kind = LockEventKind::STORE_RECONNECTED;
      event.code = ErrorCode::CONNECTION_ERROR;
      event.message = fmt::format(
          "the {} store replaced {} dead connection(s) with working ones",
          store_.name(), now - seen);
      telemetry_.emit(event);
    }
    return;
  }
} catch (...) {
  // Out of memory formatting the message: the count is kept.
}

}  // namespace dlm::internal
