// A manager's counters, histograms and event reporting (dlm/lock_events.h,
// dlm/lock_metrics.h). Counting is lock-free (relaxed atomics); events go
// to the handler on the calling thread, and a handler's exception is
// dropped here.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dlm/error.h"
#include "dlm/lock_events.h"
#include "dlm/lock_metrics.h"

namespace dlm::internal {

class Telemetry {
 public:
  Telemetry(std::string clientId, std::shared_ptr<LockEventHandler> handler);

  // Whether events are wanted: build them only then.
  bool reporting() const { return handler_ != nullptr; }
  // Stamps clientId and the time and hands `event` to the handler; never
  // throws. Call without holding any of the library's mutexes.
  void emit(LockEvent& event) noexcept;

  void acquired(std::chrono::steady_clock::duration callTime);
  void refused() { refusals_.fetch_add(1, std::memory_order_relaxed); }
  void waitStarted() { waits_.fetch_add(1, std::memory_order_relaxed); }
  void waitEnded(std::chrono::steady_clock::duration waited) {
    waitLatency_.observe(waited);
  }
  void timedOut() { timeouts_.fetch_add(1, std::memory_order_relaxed); }
  void deadlock() { deadlocks_.fetch_add(1, std::memory_order_relaxed); }
  void released(std::chrono::steady_clock::duration callTime);
  void renewed() { renewals_.fetch_add(1, std::memory_order_relaxed); }
  void leaseLost() { lostLeases_.fetch_add(1, std::memory_order_relaxed); }
  void releaseFailed() {
    releaseFailures_.fetch_add(1, std::memory_order_relaxed);
  }
  void storeError(ErrorCode code);
  // Counts a failed store call and, when reporting, emits `event` (the
  // lock's fields, if any) as STORE_ERROR with `failure`'s code and
  // `message` (the failure's own when empty; stores' messages carry no
  // password).
  void storeFailed(const DLMException& failure, LockEvent event = {},
                   std::string message = {}) noexcept;
  void reconnected() { reconnects_.fetch_add(1, std::memory_order_relaxed); }

  LockMetrics snapshot() const;

 private:
  class Histogram {
   public:
    void observe(std::chrono::steady_clock::duration d);
    LatencyHistogram snapshot() const;

   private:
    std::array<std::atomic<std::uint64_t>, LatencyHistogram::kBounds.size() + 1>
        counts_{};
    std::atomic<std::uint64_t> count_{0};
    std::atomic<std::uint64_t> sumNs_{0};
  };

  static constexpr std::size_t kCodes = 16;  // > every ErrorCode value

  const std::string clientId_;
  const std::shared_ptr<LockEventHandler> handler_;
  std::atomic<std::uint64_t> acquisitions_{0};
  std::atomic<std::uint64_t> refusals_{0};
  std::atomic<std::uint64_t> waits_{0};
  std::atomic<std::uint64_t> timeouts_{0};
  std::atomic<std::uint64_t> deadlocks_{0};
  std::atomic<std::uint64_t> releases_{0};
  std::atomic<std::uint64_t> renewals_{0};
  std::atomic<std::uint64_t> lostLeases_{0};
  std::atomic<std::uint64_t> releaseFailures_{0};
  std::atomic<std::uint64_t> reconnects_{0};
  std::array<std::atomic<std::uint64_t>, kCodes> storeErrors_{};
  Histogram acquireLatency_;
  Histogram releaseLatency_;
  Histogram waitLatency_;
};

}  // namespace dlm::internal
