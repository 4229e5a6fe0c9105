// toPrometheusText (dlm/lock_metrics.h): the text exposition format 0.0.4.
#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "dlm/lock_metrics.h"

namespace dlm {
namespace {

// A label value: backslash, double quote and newline escaped.
std::string labelValue(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// A sample value: integers as such, the rest with enough digits to round
// trip ("+Inf" never occurs: every value is a finite count or sum).
std::string number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 1e15) {
    return fmt::format("{}", static_cast<long long>(v));
  }
  return fmt::format("{:.9g}", v);
}

std::string bound(double le) { return fmt::format("{}", le); }

void header(std::string& out, const char* name, const char* type,
            const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void counter(std::string& out, const std::vector<LockMetrics>& managers,
             const char* name, const char* help,
             const std::function<std::uint64_t(const LockMetrics&)>& get) {
  header(out, name, "counter", help);
  for (const auto& m : managers) {
    out += fmt::format("{}{{client=\"{}\"}} {}\n", name, labelValue(m.clientId),
                       get(m));
  }
}

void histogram(
    std::string& out, const std::vector<LockMetrics>& managers,
    const char* name, const char* help,
    const std::function<const LatencyHistogram&(const LockMetrics&)>& get) {
  header(out, name, "histogram", help);
  for (const auto& m : managers) {
    const LatencyHistogram& h = get(m);
    const std::string client = labelValue(m.clientId);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < LatencyHistogram::kBounds.size(); ++i) {
      cumulative += h.counts[i];
      out +=
          fmt::format("{}_bucket{{client=\"{}\",le=\"{}\"}} {}\n", name, client,
                      bound(LatencyHistogram::kBounds[i]), cumulative);
    }
    out += fmt::format("{}_bucket{{client=\"{}\",le=\"+Inf\"}} {}\n", name,
                       client, h.count);
    out += fmt::format("{}_sum{{client=\"{}\"}} {}\n", name, client,
                       number(h.sumSeconds));
    out += fmt::format("{}_count{{client=\"{}\"}} {}\n", name, client, h.count);
  }
}

}  // namespace

std::string toPrometheusText(const std::vector<LockMetrics>& managers) {
  std::string out;
  counter(out, managers, "dlm_acquisitions_total", "Locks acquired.",
          [](const LockMetrics& m) { return m.acquisitions; });
  counter(out, managers, "dlm_refusals_total",
          "Acquire attempts refused because the lock was held or queued for.",
          [](const LockMetrics& m) { return m.refusals; });
  counter(out, managers, "dlm_waits_total",
          "acquireLock calls that had to wait.",
          [](const LockMetrics& m) { return m.waits; });
  counter(out, managers, "dlm_timeouts_total",
          "acquireLock calls that gave up at their timeout.",
          [](const LockMetrics& m) { return m.timeouts; });
  counter(out, managers, "dlm_deadlocks_total", "Deadlocks detected.",
          [](const LockMetrics& m) { return m.deadlocks; });
  counter(out, managers, "dlm_releases_total", "Locks released.",
          [](const LockMetrics& m) { return m.releases; });
  counter(out, managers, "dlm_renewals_total", "Lease renewals by keep-alive.",
          [](const LockMetrics& m) { return m.renewals; });
  counter(out, managers, "dlm_lost_leases_total",
          "Leases kept alive that were lost.",
          [](const LockMetrics& m) { return m.lostLeases; });
  counter(out, managers, "dlm_release_failures_total",
          "Releases by a destructor that failed.",
          [](const LockMetrics& m) { return m.releaseFailures; });
  counter(out, managers, "dlm_store_reconnects_total",
          "Dead store connections replaced by working ones.",
          [](const LockMetrics& m) { return m.storeReconnects; });
  header(out, "dlm_store_errors_total", "counter",
         "Failed store calls by error code (retries included).");
  for (const auto& m : managers) {
    for (const auto& [code, n] : m.storeErrors) {
      out += fmt::format(
          "dlm_store_errors_total{{client=\"{}\",code=\"{}\"}} "
          "{}\n",
          labelValue(m.clientId), toString(code), n);
    }
  }
  histogram(out, managers, "dlm_acquire_duration_seconds",
            "Time of acquire calls that acquired, waiting included.",
            [](const LockMetrics& m) -> const LatencyHistogram& {
              return m.acquireLatency;
            });
  histogram(out, managers, "dlm_release_duration_seconds",
            "Time of release calls that released.",
            [](const LockMetrics& m) -> const LatencyHistogram& {
              return m.releaseLatency;
            });
  histogram(out, managers, "dlm_wait_duration_seconds",
            "Time acquireLock calls spent waiting, whatever the outcome.",
            [](const LockMetrics& m) -> const LatencyHistogram& {
              return m.waitLatency;
            });
  return out;
}

}  // namespace dlm
