#include "contention/fairness.h"

#include <fmt/format.h>

#include <algorithm>

#include "contention/scenario.h"
#include "contention/worker_processes.h"

namespace dlm::test::contention {

double FairnessRun::share(std::size_t process) const {
  if (total == 0 || process >= holds.size()) return 0;
  return static_cast<double>(holds[process]) / static_cast<double>(total);
}

double FairnessRun::minShare() const {
  double least = holds.empty() ? 0 : 1;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    least = std::min(least, share(i));
  }
  return least;
}

FairnessRun runFairness(const std::string& url, const std::string& schema,
                        RunUntil until, const std::string& dir) {
  std::vector<std::vector<std::string>> perWorker;
  for (const std::string& key : fairnessKeys()) {
    perWorker.push_back({"--scenario", "fairness", "--key", key, "--threads",
                         "1", "--attempts", "1"});
  }
  const ProcessRun processes =
      runWorkerProcesses(url, schema, perWorker, until, dir);
  FairnessRun run;
  run.problems = processes.problems;
  run.reachedTargets = processes.reachedTargets;
  std::vector<oracle::Hold> all;
  for (const auto& result : processes.results) {
    std::int64_t inside = 0;
    for (const oracle::Hold& h : result.holds) {
      if (h.startNs < processes.stopNs) ++inside;
    }
    run.holds.push_back(inside);
    run.total += inside;
    all.insert(all.end(), result.holds.begin(), result.holds.end());
  }
  run.report = oracle::checkHolds(std::move(all), '.');
  return run;
}

std::string describeShares(const FairnessRun& run) {
  std::string text;
  const auto keys = fairnessKeys();
  for (std::size_t i = 0; i < run.holds.size(); ++i) {
    text += fmt::format("{} {:.1f}% ({})  ", i < keys.size() ? keys[i] : "?",
                        100 * run.share(i), run.holds[i]);
  }
  text += fmt::format("min {:.1f}%  total {}", 100 * run.minShare(), run.total);
  return text;
}

}  // namespace dlm::test::contention
