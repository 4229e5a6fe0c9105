// A lock key as a store sees it. Built by the manager (a Lock carries one);
// applications never need to look inside.
#pragma once

#include <string>
#include <vector>

#include "dlm/export.h"

namespace dlm {

// The scoped key and the keys the hierarchy protocol has to look at. Stores
// never parse keys.
struct DLM_API StoreKey {
  // The full scoped key, e.g. "DC#farm1#billing#jobs.nightly".
  std::string key;
  // Scoped keys of every ancestor, root first ("DC#farm1#billing#jobs").
  // Empty when the id has one segment or hierarchy is off.
  std::vector<std::string> ancestors;
  // Descendants of `key` are exactly the keys k with
  // descendantsBegin <= k < descendantsEnd in byte order (key + separator and
  // key + the byte after the separator). Both empty when hierarchy is off.
  std::string descendantsBegin;
  std::string descendantsEnd;
};

}  // namespace dlm
