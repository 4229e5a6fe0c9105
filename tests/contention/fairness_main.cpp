// dlm_fairness: the full fairness measurement (per-process shares of the
// holds of three processes looping on related keys).
// Per store, a fresh database and `runs` runs of `seconds` each of the
// three-process p / p.c / p.c.d loop; prints every run's per-process shares,
// one line per run, and exits 1 when a run failed or a process got under
// 20 % of the holds.
//
//   dlm_fairness [--store sqlite|postgres]... [--runs 10] [--seconds 5]
//
// PostgreSQL: the server named by libpq's PG* variables, as for the tests.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "contention/fairness.h"
#include "support/test_stores.h"

int main(int argc, char** argv) {
  CLI::App app{"the fairness run: per-process shares of the holds"};
  std::vector<std::string> stores;
  int runs = 10;
  double seconds = 5;
  app.add_option("--store", stores, "sqlite, postgres (default: both built)")
      ->check(CLI::IsMember({"sqlite", "postgres"}));
  app.add_option("--runs", runs)->check(CLI::Range(1, 1000));
  app.add_option("--seconds", seconds)->check(CLI::Range(0.1, 3600.0));
  CLI11_PARSE(app, argc, argv);
  if (stores.empty()) stores = dlm::test::compiledStores();

  using namespace dlm::test::contention;
  bool ok = true;
  for (const std::string& store : stores) {
    try {
      auto env = dlm::test::makeEnvironment(store);
      double least = 1;
      std::printf("%s: %d runs of %g s (p / p.c / p.c.d: share of holds)\n",
                  store.c_str(), runs, seconds);
      for (int r = 1; r <= runs; ++r) {
        dlm::oracle::TempDir dir("dlm-fairness");
        const FairnessRun run = runFairness(env->url(), env->postgresSchema(),
                                            RunUntil{0, seconds},
                                            dir.path().string());
        std::printf("%s run %2d: %s\n", store.c_str(), r,
                    describeShares(run).c_str());
        for (const auto& p : run.problems) {
          std::printf("  problem: %s\n", p.c_str());
        }
        for (const auto& p : dlm::oracle::describeProblems(run.report)) {
          std::printf("  checker: %s\n", p.c_str());
        }
        least = std::min(least, run.minShare());
        ok = ok && run.problems.empty() && run.report.ok() &&
             run.minShare() >= 0.2;
        std::fflush(stdout);
      }
      std::printf("%s: smallest share in %d runs: %.1f%%\n", store.c_str(),
                  runs, 100 * least);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlm_fairness: %s: %s\n", store.c_str(), e.what());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}
