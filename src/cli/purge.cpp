// dlmctl purge: deletes lock rows that have been idle for a while, in short
// batches, without letting any key's fencing tokens go back.
#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <thread>

#include "commands.h"
#include "output_text.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {
namespace {

// Between batches, so that lock calls queued behind a batch's row locks go
// first.
constexpr std::chrono::milliseconds kPauseBetweenBatches{10};

}  // namespace

int runPurge(const GlobalOptions& global, const PurgeOptions& options) {
  auto store = openExistingStore(global);
  const auto batch = [&](int size, bool dry) {
    const DeadlineScope deadline(
        deadlineAfter(LockConfiguration{}.operationTimeout));
    return adminOf(*store).purgeIdle(options.idleFor, size, dry);
  };
  const std::string idle = formatDuration(options.idleFor);
  if (options.dryRun) {
    // Counting changes nothing and locks nothing for long: one call.
    const PurgeBatch counted = batch(std::numeric_limits<int>::max(), true);
    store->close();
    fmt::print(
        "would purge {} row{} idle for {} or more (fencing high-water "
        "mark {})\n",
        counted.rows, counted.rows == 1 ? "" : "s", idle, counted.fencingFloor);
    return 0;
  }
  std::int64_t total = 0;
  int batches = 0;
  PurgeBatch last;
  do {
    if (batches > 0) std::this_thread::sleep_for(kPauseBetweenBatches);
    last = batch(options.batch, false);
    total += last.rows;
    ++batches;
  } while (last.rows >= options.batch);
  store->close();
  fmt::print(
      "purged {} row{} idle for {} or more in {} batch{}; fencing "
      "high-water mark {}\n",
      total, total == 1 ? "" : "s", idle, batches, batches == 1 ? "" : "es",
      last.fencingFloor);
  return 0;
}

}  // namespace dlm::cli
