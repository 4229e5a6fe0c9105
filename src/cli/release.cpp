// The operator's overrides: dlmctl release --force (a lock whose holder is
// gone) and dlmctl waiters cancel (a waiter's request that is stuck or
// forged).
#include <fmt/format.h>

#include "commands.h"
#include "key_lookup.h"
#include "output_text.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {

int runRelease(const GlobalOptions& global, const ReleaseOptions& options) {
  const std::string key = resolveStoreKey(global, options.key, options.xdc);
  // The whole command, connecting included, within one operation timeout.
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  // Where there is no database, nothing is held: say so (exit 1) rather
  // than create an empty file.
  auto store = openExistingStore(global);
  const bool wasHeld = adminOf(*store).forceRelease(key);
  // Nothing under this name: the same id held under another level, farm or
  // client is named, never released.
  const std::vector<std::string> elsewhere =
      wasHeld ? std::vector<std::string>{}
              : heldElsewhere(adminOf(*store), key);
  store->close();
  if (!wasHeld) {
    fmt::print("{}: was not held; nothing released\n{}", keyText(key),
               heldElsewhereText(elsewhere, "release --force"));
    return 1;
  }
  fmt::print("{}: released (it was held)\n", keyText(key));
  return 0;
}

int runCancelWait(const GlobalOptions& global,
                  const CancelWaitOptions& options) {
  const std::string key = resolveStoreKey(global, options.key, options.xdc);
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  auto store = openExistingStore(global);
  const std::optional<std::string_view> owner =
      options.owner ? std::optional<std::string_view>(*options.owner)
                    : std::nullopt;
  const int removed = adminOf(*store).cancelRequests(key, owner);
  store->close();
  const std::string whose =
      options.owner ? fmt::format(" of owner {}", printable(*options.owner))
                    : std::string();
  if (removed == 0) {
    fmt::print("{}: no waiting request{}; nothing cancelled\n", keyText(key),
               whose);
    return 1;
  }
  fmt::print("{}: cancelled {} waiting request{}{}\n", keyText(key), removed,
             removed == 1 ? "" : "s", whose);
  return 0;
}

}  // namespace dlm::cli
