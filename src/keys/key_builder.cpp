#include "keys/key_builder.h"

#include <fmt/format.h>

#include "dlm/error.h"

namespace dlm::internal {

std::string keyPrefix(LockLevel level, const KeyScope& scope) {
  if (level == LockLevel::DC) {
    return "DC#" + scope.farmId + "#" + scope.clientId + "#";
  }
  return "XDC#" + scope.clientId + "#";
}

StoreKey buildStoreKey(LockLevel level, const KeyScope& scope,
                       const std::string& id) {
  const std::string prefix = keyPrefix(level, scope);
  StoreKey out;
  out.key = prefix + id;
  if (!scope.hierarchy) return out;

  // Every separator ends an ancestor; an empty segment would make "a..b" and
  // "a.b" look related in one direction and not the other, so refuse it.
  std::size_t start = 0;
  while (true) {
    const std::size_t sep = id.find(scope.separator, start);
    if (sep == start || (sep == std::string::npos && start == id.size())) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("lock id '{}' has an empty path segment", id));
    }
    if (sep == std::string::npos) break;
    out.ancestors.push_back(prefix + id.substr(0, sep));
    start = sep + 1;
  }
  // Descendants are key + separator + anything: the byte range
  // [key + sep, key + (sep + 1)). The separator is printable ASCII, so +1
  // cannot overflow.
  out.descendantsBegin = out.key + scope.separator;
  out.descendantsEnd = out.key + static_cast<char>(scope.separator + 1);
  return out;
}

}  // namespace dlm::internal
