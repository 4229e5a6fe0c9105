// Lock owners: who holds a lock, and who waits for one, in the wait-for graph.
#pragma once

#include <string>

#include "dlm/export.h"

namespace dlm {

// The calling thread's owner GUID (128 bits from the OS's secure random
// source, in GUID text form): drawn once per thread (again in
// a fork()ed child), unless an OwnerScope on this thread set another. Every
// lock the thread takes records it; ClusteredLockService keys its locks by it;
// deadlock detection follows it (a thread waiting for a lock held under its
// own owner is a deadlock).
DLM_API std::string currentOwner();

// Sets the calling thread's owner for this object's lifetime and restores the
// previous one on destruction; for work that hops threads and should count as
// one owner. Must be destroyed on the thread that made it. Throws
// INVALID_ARGUMENT for an empty owner, one over 128 bytes, or one that is not
// valid UTF-8 or holds a NUL byte.
class DLM_API OwnerScope {
 public:
  explicit OwnerScope(std::string owner);
  ~OwnerScope();
  OwnerScope(const OwnerScope&) = delete;
  OwnerScope& operator=(const OwnerScope&) = delete;

 private:
  std::string previous_;
  bool hadPrevious_ = false;
};

}  // namespace dlm
