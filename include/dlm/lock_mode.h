// Lock modes: how a holder holds a key.
#pragma once

namespace dlm {

// EXCLUSIVE: one holder of the key, and nobody holds an ancestor or a
// descendant in any mode. SHARED: any number of SHARED holders of the key at
// once; conflicts only with EXCLUSIVE holders of the key, an ancestor or a
// descendant (SHARED holders of an ancestor and a descendant are
// compatible). Two locks conflict when their keys lie on one path (equal, or
// one an ancestor of the other) and at least one of them is EXCLUSIVE.
enum class LockMode { EXCLUSIVE, SHARED };

// "EXCLUSIVE" / "SHARED", for messages and listings.
constexpr const char* lockModeName(LockMode mode) {
  return mode == LockMode::SHARED ? "SHARED" : "EXCLUSIVE";
}

}  // namespace dlm
