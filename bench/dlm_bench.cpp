// dlm_bench: one driver for every dlm benchmark (leveldb's db_bench is the
// model). Each workload prints one line with ops/s, p50/p99 latency and its
// ratio to a baseline run in the same process; --results_dir writes
// latest.md, latest.json and the data files the plots are drawn from.
#include <fmt/format.h>

#include <exception>
#include <fstream>
#include <iostream>
#include <thread>

#include "bench_util.h"
#ifdef DLM_BENCH_POSTGRES
#include "pg_cost.h"
#endif
#include "speed_targets.h"
#include "workloads.h"

namespace {

// handoff.dat: waiters, then p50 and p99 (ms) of PostgreSQL (one manager per
// thread) and SQLite (shared manager); "-" where a run is missing.
void writeHandoffData(const std::string& dir, const dlm_bench::Flags& flags,
                      const dlm_bench::Report& report) {
  std::ofstream out(dir + "/handoff.dat");
  out << "# waiters pg_p50_ms pg_p99_ms sqlite_p50_ms sqlite_p99_ms "
         "(sleepBetweenRetries = "
      << flags.sleepMs << " ms)\n";
  auto find = [&](const std::string& store, const std::string& config) {
    for (const auto& r : report.allResults()) {
      if (r.workload == "handoff" && r.store == store && r.config == config) {
        return &r;
      }
    }
    return static_cast<const dlm_bench::Result*>(nullptr);
  };
  auto cell = [](const dlm_bench::Result* r, bool p99) {
    if (r == nullptr) return std::string("-");
    return fmt::format("{:.4f}", p99 ? r->p99Ms : r->p50Ms);
  };
  for (int n : flags.waiters) {
    const auto* pg =
        find("postgres", fmt::format("waiters={} one manager+store each", n));
    const auto* sq =
        find("sqlite", fmt::format("waiters={} one shared manager", n));
    out << n << " " << cell(pg, false) << " " << cell(pg, true) << " "
        << cell(sq, false) << " " << cell(sq, true) << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dlm_bench;
  const Flags flags = parseFlags(argc, argv);
#ifdef DLM_BENCH_POSTGRES
  if (!flags.child.empty()) {
    // A child process of the cost workload: its stdout is its parent's.
    try {
      return runCostChild(flags);
    } catch (const std::exception& e) {
      std::cerr << "dlm_bench child: " << e.what() << std::endl;
      return 1;
    }
  }
#endif
  Report report;
  Machine machine;
  machine.cpu = cpuModel();
  machine.cores = std::thread::hardware_concurrency();
  machine.loadStart = loadAverage();
  machine.date = utcDate();
  std::cout << fmt::format("dlm_bench: {} ({} cores), load {}; {} s per run",
                           machine.cpu, machine.cores, machine.loadStart,
                           flags.seconds)
            << std::endl;
  int rc = 0;
  try {
#ifdef DLM_BENCH_POSTGRES
    if (flags.wantsStore("postgres")) runPostgres(flags, report, machine);
#endif
#ifdef DLM_BENCH_SQLITE
    if (flags.wantsStore("sqlite")) runSqlite(flags, report, machine);
#endif
  } catch (const std::exception& e) {
    std::cerr << "dlm_bench: " << e.what() << std::endl;
    rc = 1;
  }
  machine.loadEnd = loadAverage();
  addSpeedTargets(report);
  if (!flags.resultsDir.empty()) {
    writeMarkdown(flags.resultsDir + "/latest.md", flags, machine, report);
    writeJson(flags.resultsDir + "/latest.json", flags, machine, report);
    writeHandoffData(flags.resultsDir, flags, report);
    std::cout << "wrote " << flags.resultsDir << "/latest.md, latest.json"
              << std::endl;
  }
  return rc;
}
