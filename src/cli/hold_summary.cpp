#include "hold_summary.h"

#include <fmt/format.h>

#include <set>

namespace dlm::cli {

HoldCount countHolds(const std::vector<LockRecord>& holds) {
  HoldCount count;
  std::set<std::string> keys;
  for (const LockRecord& r : holds) {
    ++count.holds;
    keys.insert(r.key);
    // held: HELD and not expired by the store's clock (lock_record.h).
    if (!r.held) ++count.expired;
  }
  count.keys = keys.size();
  return count;
}

std::string holdCountText(const HoldCount& count) {
  if (count.holds == 0) return "0 holds";
  std::string text =
      fmt::format("{} hold{} on {} key{}", count.holds,
                  count.holds == 1 ? "" : "s", count.keys,
                  count.keys == 1 ? "" : "s");
  if (count.expired > 0) {
    text += count.holds == 1
                ? std::string(", expired")
                : fmt::format(", {} of them expired", count.expired);
  }
  return text;
}

}  // namespace dlm::cli
