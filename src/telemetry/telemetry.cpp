#include "telemetry/telemetry.h"

#include <algorithm>

namespace dlm::internal {

Telemetry::Telemetry(std::string clientId,
                     std::shared_ptr<LockEventHandler> handler)
    : clientId_(std::move(clientId)), handler_(std::move(handler)) {}

void Telemetry::emit(LockEvent& event) noexcept {
  if (!handler_) return;
  try {
    event.clientId = clientId_;
    event.at = std::chrono::system_clock::now();
    handler_->onEvent(event);
  } catch (...) {
    // A handler's failure must not change the call that reported it.
  }
}

void Telemetry::acquired(std::chrono::steady_clock::duration callTime) {
  acquisitions_.fetch_add(1, std::memory_order_relaxed);
  acquireLatency_.observe(callTime);
}

void Telemetry::released(std::chrono::steady_clock::duration callTime) {
  releases_.fetch_add(1, std::memory_order_relaxed);
  releaseLatency_.observe(callTime);
}

void Telemetry::storeError(ErrorCode code) {
  const auto i = static_cast<std::size_t>(code);
  if (i < kCodes) storeErrors_[i].fetch_add(1, std::memory_order_relaxed);
}

void Telemetry::storeFailed(const DLMException& failure, LockEvent event,
                            std::string message) noexcept try {
  storeError(failure.code());
  if (!reporting()) return;
  event.kind = LockEventKind::STORE_ERROR;
  event.code = failure.code();
  event.message = message.empty() ? std::string(failure.what())
                                  : std::move(message);
  emit(event);
} catch (...) {
  // Out of memory building the event: the count is kept.
}

void Telemetry::Histogram::observe(std::chrono::steady_clock::duration d) {
  const auto ns = std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  const double seconds = static_cast<double>(ns) / 1e9;
  const auto& bounds = LatencyHistogram::kBounds;
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sumNs_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
}

LatencyHistogram Telemetry::Histogram::snapshot() const {
  LatencyHistogram h;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    h.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  h.count = count_.load(std::memory_order_relaxed);
  h.sumSeconds =
      static_cast<double>(sumNs_.load(std::memory_order_relaxed)) / 1e9;
  return h;
}

LockMetrics Telemetry::snapshot() const {
  LockMetrics m;
  m.clientId = clientId_;
  m.acquisitions = acquisitions_.load(std::memory_order_relaxed);
  m.refusals = refusals_.load(std::memory_order_relaxed);
  m.waits = waits_.load(std::memory_order_relaxed);
  m.timeouts = timeouts_.load(std::memory_order_relaxed);
  m.deadlocks = deadlocks_.load(std::memory_order_relaxed);
  m.releases = releases_.load(std::memory_order_relaxed);
  m.renewals = renewals_.load(std::memory_order_relaxed);
  m.lostLeases = lostLeases_.load(std::memory_order_relaxed);
  m.releaseFailures = releaseFailures_.load(std::memory_order_relaxed);
  m.storeReconnects = reconnects_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < kCodes; ++i) {
    const auto n = storeErrors_[i].load(std::memory_order_relaxed);
    if (n > 0) m.storeErrors[static_cast<ErrorCode>(i)] = n;
  }
  m.acquireLatency = acquireLatency_.snapshot();
  m.releaseLatency = releaseLatency_.snapshot();
  m.waitLatency = waitLatency_.snapshot();
  return m;
}

}  // namespace dlm::internal
