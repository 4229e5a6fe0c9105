// Keys for tests that talk to a store without the manager, and the ids every
// manager must refuse.
#pragma once

#include <string>
#include <vector>

#include "dlm/lock_store.h"

namespace dlm::test {

// The StoreKey the manager builds for "<scope><id>" with '.' as separator:
// ancestors root first, descendants in [key + ".", key + "/").
inline StoreKey pathKey(const std::string& scope, const std::string& id) {
  StoreKey k;
  k.key = scope + id;
  for (std::size_t dot = id.find('.'); dot != std::string::npos;
       dot = id.find('.', dot + 1)) {
    k.ancestors.push_back(scope + id.substr(0, dot));
  }
  k.descendantsBegin = k.key + ".";
  k.descendantsEnd = k.key + "/";
  return k;
}

// Empty, over 1,024 bytes, a NUL byte, empty path segments, invalid UTF-8.
inline std::vector<std::string> invalidLockIds() {
  return {std::string(),           std::string(1025, 'x'),
          std::string("a\0b", 3),  std::string(".a"),
          std::string("a..b"),     std::string("a."),
          std::string("\xFF\xFE"), std::string("\xC3(")};
}

}  // namespace dlm::test
