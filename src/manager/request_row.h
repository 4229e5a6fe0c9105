// The request row of a waiting acquireLock, deleted however the wait ends.
#pragma once

#include <chrono>
#include <string>

#include "dlm/deadline.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class InDoubtResolver;

// Deletes the waiter's request row for `key` when it goes. A wait that
// ended with the grant (endedByGrant) leaves that to the resolver's
// background thread, so that acquireLock returns without the store call
// (the stores delete the row with the grant anyway; the interface does not
// promise it). Any other ending deletes it at once, within what is left of
// the call's time (`callEnd`) and at most `operationTimeout`, since the row
// may hold other waiters back; if that fails or there is no time left, the
// resolver deletes it in the background. A row left behind is harmless
// once it expires (the waiter's deadline + 1 s, at most kRequestLease).
// `store`, `resolver` and `key` must outlive the object.
class RequestRow {
 public:
  RequestRow(LockStore& store, InDoubtResolver& resolver,
             const std::string& key, std::string owner, Deadline callEnd,
             std::chrono::milliseconds operationTimeout);
  ~RequestRow();
  RequestRow(const RequestRow&) = delete;
  RequestRow& operator=(const RequestRow&) = delete;

  // The wait acquired the lock: the row is deleted in the background.
  void endedByGrant() noexcept { granted_ = true; }

 private:
  // True when the store deleted the row.
  bool deletedNow() noexcept;
  // Hands the row to the resolver; never throws.
  void deleteInBackground() noexcept;

  LockStore& store_;
  InDoubtResolver& resolver_;
  const std::string& key_;
  std::string owner_;
  Deadline callEnd_;
  std::chrono::milliseconds operationTimeout_;
  bool granted_ = false;
};

}  // namespace dlm::internal
