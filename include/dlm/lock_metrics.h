// Counters and latency histograms of one lock manager
// (DistributedLockManager::metrics()), and their Prometheus text form.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/export.h"

namespace dlm {

// A latency histogram with fixed bucket bounds (seconds, the Prometheus
// convention). counts[i] is the number of observations <= kBounds[i] and
// > kBounds[i - 1] (not cumulative); counts.back() those above the last
// bound.
struct DLM_API LatencyHistogram {
  static constexpr std::array<double, 15> kBounds = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,   0.5,   1,      2.5,   5,    10,    30};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};
  std::uint64_t count = 0;  // all observations
  double sumSeconds = 0;    // their sum
};

// A snapshot; every counter counts since the manager was built.
struct DLM_API LockMetrics {
  std::string clientId;
  // Successful acquisitions (tryAcquireLock and acquireLock).
  std::uint64_t acquisitions = 0;
  // Attempts refused because the key was held or queued for
  // (tryAcquireLock's LOCK_UNAVAILABLE, and each refused attempt of a
  // waiting acquireLock).
  std::uint64_t refusals = 0;
  // acquireLock calls that had to wait (their first attempt was refused).
  std::uint64_t waits = 0;
  // acquireLock calls that gave up at their timeout (LOCK_UNAVAILABLE).
  std::uint64_t timeouts = 0;
  std::uint64_t deadlocks = 0;   // DEADLOCK_DETECTED thrown
  std::uint64_t releases = 0;    // releaseLock / rollbackLock returned true
  std::uint64_t renewals = 0;    // keep-alive renewals that succeeded
  std::uint64_t lostLeases = 0;  // LockGuard leases reported lost
  // Releases made by a destructor that failed (RELEASE_FAILED events).
  std::uint64_t releaseFailures = 0;
  // Failed store calls, by the code they failed with (each retry counts).
  std::map<ErrorCode, std::uint64_t> storeErrors;
  // The store re-opened a connection that had died.
  std::uint64_t storeReconnects = 0;
  // Whole calls: acquireLock / tryAcquireLock that acquired (waiting
  // included), releaseLock that released, and the waiting part of
  // acquireLock calls that waited (whatever their outcome).
  LatencyHistogram acquireLatency;
  LatencyHistogram releaseLatency;
  LatencyHistogram waitLatency;
};

// The snapshots in the Prometheus text exposition format (version 0.0.4),
// one series per manager labelled client="<clientId>": dlm_acquisitions_total,
// dlm_refusals_total, dlm_waits_total, dlm_timeouts_total,
// dlm_deadlocks_total, dlm_releases_total, dlm_renewals_total,
// dlm_lost_leases_total, dlm_release_failures_total,
// dlm_store_reconnects_total,
// dlm_store_errors_total{code="..."} (counters) and
// dlm_acquire_duration_seconds, dlm_release_duration_seconds,
// dlm_wait_duration_seconds (histograms). Serve it over HTTP yourself
// (Content-Type: text/plain; version=0.0.4); the library has no server.
DLM_API std::string toPrometheusText(const std::vector<LockMetrics>& managers);

}  // namespace dlm
