#include "speed_targets.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace dlm_bench {
namespace {

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

// The cost lines of one condition: "<config> [<condition>]".
struct CostLines {
  const Report& report;
  std::string condition;
  const Result* get(const std::string& workload,
                    const std::string& config) const {
    return find(report, "postgres", workload, config + " [" + condition + "]");
  }
  std::string group() const {
    return "what the server pays, dlm against (e) in the same run [" +
           condition + "]";
  }
};

// The floors measured beside dlm, as "; floor: (g) 1.42x, (f) 0.74x", and
// whether the best of them reaches `goal` (true when none was measured).
// `lower`: the goal is a ceiling (server CPU), not a floor (rate).
std::string floorClause(const CostLines& c, const std::string& workload,
                        const std::string& config,
                        const std::vector<std::string>& floors,
                        const std::string& field, double goal, bool lower,
                        bool& reachable) {
  std::string text;
  bool any = false;
  reachable = false;
  for (const std::string& f : floors) {
    const Result* r = c.get("cost." + workload + "." + f, config);
    if (r == nullptr) continue;
    const double x = number(*r, field);
    if (x < 0) continue;
    text += fmt::format("{}({}) {:.2f}x", any ? ", " : "; floor: ", f, x);
    any = true;
    if (lower ? x <= goal : x >= goal) reachable = true;
  }
  if (!any) reachable = true;
  if (!reachable) text += " -- the floor misses it too";
  return text;
}

// Rate of dlm against (e): "<what>: >= goal x (e): ratio (dlm vs e /s;
// server CPU dlm vs e us per op); floor: ...".
void rateTarget(Report& report, const CostLines& c, const std::string& workload,
                const std::string& config, const std::string& what, double goal,
                const std::vector<std::string>& floors = {}) {
  const Result* d = c.get("cost." + workload, config);
  const Result* e = c.get("cost." + workload + ".e", config);
  if (d == nullptr || e == nullptr) return;
  const double ratio = number(*d, "ratio_e");
  bool reachable = true;
  const std::string floor = floorClause(c, workload, config, floors, "ratio_e",
                                        goal, false, reachable);
  report.addTarget(
      fmt::format("{}: >= {:.1f}x (e): {:.2f}x ({:.0f} vs {:.0f} /s; server "
                  "CPU {:.0f} vs {:.0f} us per op){}",
                  what, goal, ratio, d->opsPerSec, e->opsPerSec,
                  number(*d, "server_us_per_op"),
                  number(*e, "server_us_per_op"), floor),
      ratio >= goal, c.group());
}

void conditionTargets(Report& report, const std::string& condition) {
  const CostLines c{report, condition};
  if (c.get("cost.cycle.e", "threads=16") != nullptr) {
    rateTarget(report, c, "cycle", "threads=16",
               "cycle, 16 threads, one manager (cycles/s)", 2.5, {"g", "f"});
    const Result* d = c.get("cost.cycle", "threads=16");
    const Result* e = c.get("cost.cycle.e", "threads=16");
    const double r = number(*d, "server_ratio_e");
    bool reachable = true;
    const std::string floor =
        floorClause(c, "cycle", "threads=16", {"g", "f"}, "server_ratio_e", 0.5,
                    true, reachable);
    report.addTarget(
        fmt::format("cycle, 16 threads: server CPU per cycle <= 0.5x (e)'s: "
                    "{:.2f}x ({:.0f} vs {:.0f} us; WAL flushes {:.2f} vs "
                    "{:.2f}){}",
                    r, number(*d, "server_us_per_op"),
                    number(*e, "server_us_per_op"),
                    number(*d, "wal_sync_per_op"),
                    number(*e, "wal_sync_per_op"), floor),
        r >= 0 && r <= 0.5, c.group());
  }
  rateTarget(report, c, "cycle", "threads=4", "cycle, 4 threads (cycles/s)",
             1.5, {"g", "f"});
  rateTarget(report, c, "procs", "procs=4 threads=4",
             "cycle, 4 processes x 4 threads (cycles/s, summed)", 1.5, {"f"});
  rateTarget(report, c, "cycle", "threads=1", "cycle, 1 thread (cycles/s)",
             condition == "local" ? 1.0 : 1.5, {"f"});
  {
    const Result* d = c.get("cost.keepalive", "locks=1000");
    const Result* e = c.get("cost.keepalive.e_extend", "locks=1000");
    if (d != nullptr && e != nullptr) {
      const double r = number(*d, "server_ratio_e_extend");
      report.addTarget(
          fmt::format("keep-alive of 1,000 held locks: server CPU per "
                      "renewed lease <= 0.2x (e)'s extend: {:.2f}x ({:.1f} vs "
                      "{:.1f} us)",
                      r, number(*d, "server_us_per_op"),
                      number(*e, "server_us_per_op")),
          r >= 0 && r <= 0.2, c.group());
    }
  }
  {
    const Result* d = c.get("cost.acquire_all", "keys=10 threads=1");
    const Result* one = c.get("cost.acquire_all.one", "keys=10 threads=1");
    if (d != nullptr && one != nullptr) {
      const double r = number(*d, "server_ratio_one");
      report.addTarget(
          fmt::format("tryAcquireAll of 10 keys: <= 3x the server CPU of one "
                      "acquire: {:.2f}x ({:.0f} vs {:.0f} us per call, each "
                      "with its release)",
                      r, number(*d, "server_us_per_op"),
                      number(*one, "server_us_per_op")),
          r >= 0 && r <= 3.0, c.group());
    } else if (d != nullptr) {
      report.addTarget(
          "tryAcquireAll of 10 keys: <= 3x the server CPU of one acquire: not "
          "measured (" +
              d->extra + ")",
          false, c.group());
    }
  }
  rateTarget(report, c, "contended", "threads=4 one key",
             "contended one key, 4 threads (acquired/s)", 2.0, {"f"});
  rateTarget(report, c, "extend", "threads=1 held lock",
             "extend, 1 thread (extends/s)", 1.0, {"f"});
}

void noRegressionTargets(Report& report) {
  const std::string group = "no regression";
  const Result* d1 =
      find(report, "postgres", "cost.cycle", "threads=1 [local]");
  const Result* d8 =
      find(report, "postgres", "cost.cycle.dlm_depth8", "threads=1 [local]");
  if (d1 != nullptr && d8 != nullptr) {
    const double a = number(*d1, "server_us_per_op");
    const double b = number(*d8, "server_us_per_op");
    report.addTarget(
        fmt::format(
            "depth 8: server CPU per cycle <= 1.5x depth 1's (as "
            "before, 1.29x at schema 11): {:.2f}x ({:.0f} vs {:.0f} us)",
            b / a, b, a),
        a > 0 && b <= 1.5 * a, group);
  }
  const Result* junk = find(report, "postgres", "junk", "threads=1");
  if (junk != nullptr) {
    const double r = number(*junk, "ratio_clean");
    report.addTarget(
        fmt::format("junk: the cycle among 100,000 live requests and SHARED "
                    "holds >= 0.9x a clean database's (0.99x at schema 8): "
                    "{:.2f}x",
                    r),
        r >= 0.9, group);
  }
  const Result* h =
      find(report, "postgres", "handoff", "waiters=1 one manager+store each");
  if (h != nullptr) {
    report.addTarget(
        fmt::format("PostgreSQL handoff p50 with 1 waiter <= 1 ms (0.54-0.93 "
                    "ms at schema 17): {:.3f} ms",
                    h->p50Ms),
        h->p50Ms <= 1.0, group);
  }
  const Result* s = find(report, "sqlite", "cycle", "threads=1");
  if (s != nullptr) {
    const double r = number(*s, "ratio_raw");
    report.addTarget(
        fmt::format("SQLite cycle, 1 thread >= 0.85x raw sqlite3 doing the "
                    "same transactions (0.85x at schema 11): {:.2f}x",
                    r),
        r >= 0.85, group);
  }
  const Result* e1 = find(report, "postgres", "events", "threads=1");
  if (e1 != nullptr) {
    const double r = number(*e1, "ratio_off");
    report.addTarget(
        fmt::format("events, 1 thread: >= 0.97x the cycle without an event "
                    "handler: {:.2f}x",
                    r),
        r >= 0.97, group);
  }
}

}  // namespace

void addSpeedTargets(Report& report) {
  // The issue-38 targets, judged in each condition that ran. The earlier
  // target on pg_stat_statements time (<= 45 us per cycle) is dropped: that
  // counter counts a bare statement's run but a function's nested
  // statements with their set-up, so it compared unlike things;
  // docs/performance.md says how the cost is measured now.
  for (const char* condition : {"local", "sync standby"}) {
    conditionTargets(report, condition);
  }
  noRegressionTargets(report);
}

}  // namespace dlm_bench
