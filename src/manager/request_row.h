// The request row of a waiting acquireLock, deleted however the wait ends.
#pragma once

#include <chrono>
#include <string>

#include "dlm/deadline.h"
#include "dlm/lock_store.h"

namespace dlm::internal {

class InDoubtResolver;

// Deletes the waiter's request row for `key` when it goes, within what is
// left of the call's time (`callEnd`) and at most `operationTimeout`. A
// failure there is harmless: the row expires at the waiter's deadline and
// is then ignored; the resolver deletes it in the background meanwhile.
// `store`, `resolver` and `key` must outlive the object.
class RequestRow {
 public:
  RequestRow(LockStore& store, InDoubtResolver& resolver,
             const std::string& key, std::string owner, Deadline callEnd,
             std::chrono::milliseconds operationTimeout);
  ~RequestRow();
  RequestRow(const RequestRow&) = delete;
  RequestRow& operator=(const RequestRow&) = delete;

 private:
  LockStore& store_;
  InDoubtResolver& resolver_;
  const std::string& key_;
  std::string owner_;
  Deadline callEnd_;
  std::chrono::milliseconds operationTimeout_;
};

}  // namespace dlm::internal
