// dlmctl release: the operator's override for a lock whose holder is gone.
#include <fmt/format.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "dlm/deadline.h"
#include "dlm/lock.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {

namespace {

bool isStoreKey(const std::string& s) {
  return s.rfind("DC#", 0) == 0 || s.rfind("XDC#", 0) == 0;
}

}  // namespace

int runRelease(const GlobalOptions& global, Args& args) {
  const bool xdc = args.takeFlag("--xdc");
  const auto target = args.takePositional();
  if (!target) throw UsageError("release needs the KEY to release");
  args.requireEmpty();

  // The whole command, connecting included, within one operation timeout.
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  // Where there is no database, nothing is held: say so rather than
  // create an empty file.
  requireExistingDatabase(global);
  auto store = openCliStore(global);
  std::string key = *target;
  if (!isStoreKey(key)) {
    // A lock id: let the manager build the key, so that scoping and
    // validation are exactly the library's.
    auto manager = openManager(global, store, /*applyMigrations=*/false);
    key =
        manager->getLockInstance(*target, xdc ? LockLevel::XDC : LockLevel::DC)
            .storeKey();
  } else {
    if (xdc) throw UsageError("--xdc is for lock ids, not store keys");
    store->initialize(/*applyMigrations=*/false);
  }
  const bool wasHeld = store->forceRelease(key);
  store->close();
  fmt::print(
      "{}: {}\n", key,
      wasHeld ? "released (it was held)" : "was not held; nothing to do");
  return 0;
}

}  // namespace dlm::cli
