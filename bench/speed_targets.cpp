#include "speed_targets.h"

#include <fmt/format.h>

namespace dlm_bench {
namespace {

const char* const kServerTime = "server time per cycle";

const Result* find(const Report& report, const std::string& store,
                   const std::string& workload, const std::string& config) {
  for (const auto& r : report.allResults()) {
    if (r.store == store && r.workload == workload && r.config == config) {
      return &r;
    }
  }
  return nullptr;
}

double number(const Result& r, const std::string& name) {
  const auto it = r.numbers.find(name);
  return it == r.numbers.end() ? -1 : it->second;
}

// "ratio_e >= goal" of a result, when it ran.
void ratioTarget(Report& report, const std::string& store,
                 const std::string& workload, const std::string& config,
                 const std::string& ratioName, const std::string& what,
                 double goal, const char* group = kServerTime) {
  const Result* r = find(report, store, workload, config);
  if (r == nullptr) return;
  const double ratio = number(*r, ratioName);
  report.addTarget(fmt::format("{} {}: >= {:.2f}x {}: {:.2f}x", workload,
                               config, goal, what, ratio),
                   ratio >= goal, group);
}

void clientCpuTarget(Report& report, const std::string& config) {
  const Result* lib = find(report, "postgres", "cycle", config);
  const Result* raw = find(report, "postgres", "cycle.base_a", config);
  if (lib == nullptr || raw == nullptr) return;
  const double a = number(*lib, "client_cpu_us_per_op");
  const double b = number(*raw, "client_cpu_us_per_op");
  const double ratio = b > 0 ? a / b : -1;
  report.addTarget(
      fmt::format("client CPU per cycle {}: <= 1.1x raw libpq calling the "
                  "same functions (a): {:.2f}x ({:.0f} vs {:.0f} us)",
                  config, ratio, a, b),
      ratio > 0 && ratio <= 1.1, kServerTime);
}

void serverTargets(Report& report) {
  const Result* d1 = find(report, "postgres", "cycle.server", "dlm threads=1");
  if (d1 == nullptr) return;
  const double us1 = number(*d1, "server_us_per_op");
  if (us1 < 0) return;  // pg_stat_statements not loaded
  // The same run's floor: the protocol's skeleton without any check (f).
  const Result* f = find(report, "postgres", "cycle.server", "base_f threads=1");
  const double usF = f == nullptr ? -1 : number(*f, "server_us_per_op");
  report.addTarget(
      fmt::format("server statement time per cycle, depth 1: <= 45 us: "
                  "{:.1f} us (the skeleton (f): {:.1f} us)",
                  us1, usF),
      us1 <= 45, kServerTime);
  const Result* d8 =
      find(report, "postgres", "cycle.depth8.server", "dlm depth=8 threads=1");
  if (d8 == nullptr) return;
  const double us8 = number(*d8, "server_us_per_op");
  report.addTarget(
      fmt::format("server statement time per cycle, depth 8: <= 1.5x depth "
                  "1: {:.2f}x ({:.1f} vs {:.1f} us)",
                  us8 / us1, us8, us1),
      us8 <= 1.5 * us1, kServerTime);
}

void handoffTarget(Report& report) {
  const Result* r =
      find(report, "postgres", "handoff", "waiters=1 one manager+store each");
  if (r == nullptr) return;
  report.addTarget(
      fmt::format("PostgreSQL handoff p50 with 1 waiter: <= 0.4 ms: {:.3f} ms",
                  r->p50Ms),
      r->p50Ms <= 0.4, kServerTime);
}

}  // namespace

void addSpeedTargets(Report& report) {
  const std::string e = "(e) ShedLock's statements";
  ratioTarget(report, "postgres", "cycle", "threads=1", "ratio_e", e, 1.3);
  ratioTarget(report, "postgres", "cycle", "threads=4", "ratio_e", e, 1.2);
  ratioTarget(report, "postgres", "contended", "threads=4 one key", "ratio_e",
              e + " (acquired/s)", 2.0);
  serverTargets(report);
  clientCpuTarget(report, "threads=1");
  clientCpuTarget(report, "threads=4");
  ratioTarget(report, "postgres", "extend", "threads=1 held lock", "ratio_e",
              "(e)'s extend statement", 1.0);
  handoffTarget(report);
  ratioTarget(report, "sqlite", "cycle", "threads=1", "ratio_raw",
              "raw sqlite3 doing the same transactions", 0.95);
  ratioTarget(report, "postgres", "events", "threads=1", "ratio_off",
              "the cycle without an event handler", 0.97, "events");
  ratioTarget(report, "postgres", "events", "threads=4", "ratio_off",
              "the cycle without an event handler", 0.97, "events");
}

}  // namespace dlm_bench
