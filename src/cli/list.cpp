// dlmctl list: who holds which lock, for operators.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "cli/time_text.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {

int runList(const GlobalOptions& global, Args& args) {
  const std::string prefix = args.take("--prefix").value_or("");
  args.requireEmpty();
  // The whole command, connecting included, within one operation timeout.
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  // Listing must not leave an empty database file behind.
  requireExistingDatabase(global);
  auto store = openCliStore(global);
  // Only checks the version: listing must not change the schema.
  store->initialize(/*applyMigrations=*/false);
  const std::vector<LockRecord> records = store->listHeld(prefix);
  const StoreTime now = store->now();
  store->close();

  if (records.empty()) {
    fmt::print("no held locks{}\n",
               prefix.empty() ? "" : fmt::format(" with prefix '{}'", prefix));
    return 0;
  }
  using Row = std::array<std::string, 8>;
  std::vector<Row> rows;
  rows.push_back({"KEY", "OWNER", "HOST", "PID", "FENCING", "ACQUIRED (UTC)",
                  "EXPIRES (UTC)", "REMAINING"});
  for (const LockRecord& r : records) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        r.expiresAt - now);
    // `held` is the store's own verdict at query time; trust it over the
    // subtraction, which uses a second reading of the clock.
    const std::string remaining =
        r.held ? formatDuration(std::max(left, std::chrono::milliseconds(0)))
               : "EXPIRED";
    rows.push_back({r.key, r.owner, r.holder.host, std::to_string(r.holder.pid),
                    std::to_string(r.fencingToken), formatUtc(r.acquiredAt),
                    formatUtc(r.expiresAt), remaining});
  }
  std::array<std::size_t, 8> width{};
  for (const Row& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  for (const Row& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += c + 1 == row.size() ? row[c]
                                  : fmt::format("{:<{}}  ", row[c], width[c]);
    }
    fmt::print("{}\n", line);
  }
  const auto expired =
      std::count_if(records.begin(), records.end(),
                    [](const LockRecord& r) { return !r.held; });
  fmt::print("{} held lock{}, {} of them expired\n", records.size(),
             records.size() == 1 ? "" : "s", expired);
  return 0;
}

}  // namespace dlm::cli
