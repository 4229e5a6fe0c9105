// One side of a cross-process deadlock: takes --hold at once, waits until
// --start-at-ns, then acquireLock(--want) and writes what happened to --out
// ("acquired <ms>" or "<error code number> <ms>"), then releases everything
// so the other side can go on.
//
//   dlm_deadlock_worker --url URL [--schema S] --hold ID --want ID
//       --start-at-ns NS --out FILE
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "contender.h"
#include "contention/scenario.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"

int main(int argc, char** argv) {
  CLI::App app{"one side of a cross-process deadlock"};
  std::string url, schema, hold, want, out;
  std::int64_t startAtNs = 0;
  app.add_option("--url", url)->required();
  app.add_option("--schema", schema);
  app.add_option("--hold", hold)->required();
  app.add_option("--want", want)->required();
  app.add_option("--start-at-ns", startAtNs)->required();
  app.add_option("--out", out)->required();
  CLI11_PARSE(app, argc, argv);
  try {
    dlm::LockConfiguration config;
    config.waitForLock = std::chrono::seconds(20);
    config.sleepBetweenRetries = std::chrono::milliseconds(200);
    auto manager = dlm::DistributedLockManager::builder()
                       .clientId(dlm::test::contention::kClient)
                       .farmId(dlm::test::contention::kFarm)
                       .store(dlm::openStore(url, schema))
                       .configuration(config)
                       .build();
    manager->initialize();
    dlm::Lock held = manager->getLockInstance(hold, dlm::LockLevel::DC);
    manager->tryAcquireLock(held);

    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(startAtNs))));
    dlm::Lock wanted = manager->getLockInstance(want, dlm::LockLevel::DC);
    const auto start = std::chrono::steady_clock::now();
    std::string outcome;
    try {
      manager->acquireLock(wanted);
      outcome = "acquired";
    } catch (const dlm::DLMException& e) {
      outcome = std::to_string(static_cast<int>(e.code()));
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    std::ofstream(out) << outcome << ' ' << ms << '\n';
    manager->releaseLock(wanted);
    manager->releaseLock(held);
    manager->destroy();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlm_deadlock_worker: %s\n", e.what());
    return 1;
  }
}
