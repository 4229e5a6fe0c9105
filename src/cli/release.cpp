// dlmctl release --force: the operator's override for a lock whose holder is
// gone.
#include <fmt/format.h>

#include "commands.h"
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
  store->close();
  if (!wasHeld) {
    fmt::print("{}: was not held; nothing released\n", printable(key));
    return 1;
  }
  fmt::print("{}: released (it was held)\n", printable(key));
  return 0;
}

}  // namespace dlm::cli
