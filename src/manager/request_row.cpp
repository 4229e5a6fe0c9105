#include "manager/request_row.h"

#include <algorithm>
#include <utility>

#include "dlm/error.h"
#include "dlm/lock_store.h"
#include "manager/in_doubt_resolver.h"

namespace dlm::internal {

using std::chrono::milliseconds;

RequestRow::RequestRow(LockStore& store, InDoubtResolver& resolver,
                       const std::string& key, std::string owner,
                       Deadline callEnd, milliseconds operationTimeout)
    : store_(store),
      resolver_(resolver),
      key_(key),
      owner_(std::move(owner)),
      callEnd_(callEnd),
      operationTimeout_(operationTimeout) {}

RequestRow::~RequestRow() {
  if (granted_ || !deletedNow()) deleteInBackground();
}

bool RequestRow::deletedNow() noexcept {
  const Deadline deadline =
      std::min(callEnd_, deadlineAfter(operationTimeout_));
  try {
    if (timeLeft(deadline) > milliseconds::zero()) {
      const DeadlineScope scope(deadline);
      store_.unregisterWait(key_, owner_);
      return true;
    }
  } catch (const DLMException&) {
    // Left to the resolver.
  }
  return false;
}

void RequestRow::deleteInBackground() noexcept {
  // The row lives until its lease ends (at most kRequestLease after its
  // last registration, never past the waiter's deadline) + 1 s. A wait
  // without a deadline has an end too far off to add to a clock.
  try {
    resolver_.addStaleRequest(
        key_, owner_,
        std::min(std::max(timeLeft(callEnd_), milliseconds::zero()),
                 kRequestLease) +
            milliseconds(1000));
  } catch (...) {
    // Out of memory at worst: the row expires by itself.
  }
}

}  // namespace dlm::internal
