// Running test code under another lock owner than the calling thread's.
#pragma once

#include <string>
#include <utility>

#include "dlm/owner.h"

namespace dlm::test {

// Runs fn with `owner` as the calling thread's owner: a lock it takes there
// is held by "another owner" for the thread's later waits (a thread waiting
// for a lock held under its own owner is a deadlock).
template <typename Fn>
decltype(auto) asOwner(const std::string& owner, Fn&& fn) {
  OwnerScope scope(owner);
  return std::forward<Fn>(fn)();
}

}  // namespace dlm::test
