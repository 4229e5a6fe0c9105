#include "contention/worker_processes.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "contention/signal_file.h"
#include "hold_log.h"

extern char** environ;

namespace dlm::test::contention {

pid_t spawnProcess(const char* program, const std::vector<std::string>& args,
                   std::string* problem) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, program, nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    *problem = fmt::format("posix_spawn {}: {}", program, std::strerror(rc));
    return -1;
  }
  return pid;
}

int waitForExit(pid_t pid) {
  int status = 0;
  // EINTR: keep waiting.
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

ProcessRun runWorkerProcesses(
    const std::string& url, const std::string& schema,
    const std::vector<std::vector<std::string>>& perWorker, RunUntil until,
    const std::string& dir) {
  ProcessRun run;
  const std::string stopFile = fmt::format("{}/stop", dir);
  // A common start, late enough for every worker to start and connect.
  run.startAtNs =
      oracle::steadyNowNs() + std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::milliseconds(1500))
                               .count();
  const std::int64_t deadlineNs =
      run.startAtNs + static_cast<std::int64_t>(until.maxSeconds * 1e9);
  std::vector<pid_t> pids;
  std::vector<std::string> outs, reachedFiles;
  for (std::size_t w = 0; w < perWorker.size(); ++w) {
    outs.push_back(fmt::format("{}/worker-{}", dir, w + 1));
    reachedFiles.push_back(outs.back() + ".reached");
    std::vector<std::string> args{"dlm_contention_worker",
                                  "--url",
                                  url,
                                  "--worker",
                                  std::to_string(w + 1),
                                  "--seconds",
                                  fmt::format("{}", until.maxSeconds),
                                  "--stop-file",
                                  stopFile,
                                  "--start-at-ns",
                                  std::to_string(run.startAtNs),
                                  "--out",
                                  outs.back()};
    if (!schema.empty()) {
      args.push_back("--schema");
      args.push_back(schema);
    }
    if (until.targetHolds > 0) {
      args.insert(args.end(), {"--target-holds",
                               std::to_string(until.targetHolds),
                               "--reached-file", reachedFiles.back()});
    }
    args.insert(args.end(), perWorker[w].begin(), perWorker[w].end());
    std::string problem;
    pids.push_back(spawnProcess(DLM_CONTENTION_WORKER, args, &problem));
    if (pids.back() <= 0) run.problems.push_back(problem);
  }
  run.stopNs = deadlineNs;
  if (until.targetHolds > 0) {
    // Until every worker says its threads reached the target, or the
    // deadline; then every worker is told to stop at once.
    for (;;) {
      bool all = true;
      for (const auto& f : reachedFiles) all = all && signalFileRaised(f);
      if (all) {
        run.reachedTargets = true;
        break;
      }
      if (oracle::steadyNowNs() >= deadlineNs) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    run.stopNs = std::min(run.stopNs, oracle::steadyNowNs());
    raiseSignalFile(stopFile);
  }
  for (std::size_t w = 0; w < perWorker.size(); ++w) {
    oracle::ContendResult result;
    if (pids[w] <= 0) {
      result.error = "not started";
      run.results.push_back(result);
      continue;
    }
    const int status = waitForExit(pids[w]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      run.problems.push_back(
          fmt::format("worker {} ended with status {}", w + 1, status));
    }
    std::ifstream in(outs[w]);
    std::string problem;
    auto read = oracle::readResult(in, &problem);
    if (!read) {
      run.problems.push_back(fmt::format("worker {}: {}", w + 1, problem));
      result.error = problem;
    } else {
      result = std::move(*read);
      if (!result.error.empty()) {
        run.problems.push_back(
            fmt::format("worker {}: {}", w + 1, result.error));
      }
    }
    run.results.push_back(std::move(result));
  }
  return run;
}

}  // namespace dlm::test::contention
