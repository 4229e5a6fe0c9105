// One side of a cross-process deadlock: takes --hold at once, waits until
// --start-at-ns, then acquireLock(--want) and writes what happened to --out
// ("acquired <ms>" or "<error code number> <ms>"), then releases everything
// so the other side can go on.
//
//   dlm_deadlock_worker --url URL [--schema S] --hold ID --want ID
//       --start-at-ns NS --out FILE
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/cli_args.h"
#include "cli/contender.h"
#include "contention/scenario.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"

namespace {

std::string required(dlm::cli::Args& args, const std::string& name) {
  auto value = args.take(name);
  if (!value) throw dlm::cli::UsageError(name + " is required");
  return *value;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    dlm::cli::Args args(std::vector<std::string>(argv + 1, argv + argc));
    const std::string url = required(args, "--url");
    const std::string schema = args.take("--schema").value_or("");
    const std::string hold = required(args, "--hold");
    const std::string want = required(args, "--want");
    const std::int64_t startAtNs = std::stoll(required(args, "--start-at-ns"));
    const std::string out = required(args, "--out");

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
