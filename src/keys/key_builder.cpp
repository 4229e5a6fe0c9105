#include "keys/key_builder.h"

#include <fmt/format.h>

#include "dlm/error.h"

namespace dlm::internal {

namespace {

// Appends keyPrefix(level, scope) to `out`, which has room for `extra` more
// bytes after it (one allocation for the whole key).
void appendKeyPrefix(LockLevel level, const KeyScope& scope, std::size_t extra,
                     std::string& out) {
  if (level == LockLevel::DC) {
    out.reserve(out.size() + 5 + scope.farmId.size() + scope.clientId.size() +
                extra);
    out.append("DC#").append(scope.farmId).append("#");
  } else {
    out.reserve(out.size() + 5 + scope.clientId.size() + extra);
    out.append("XDC#");
  }
  out.append(scope.clientId).append("#");
}

}  // namespace

std::string keyPrefix(LockLevel level, const KeyScope& scope) {
  std::string prefix;
  appendKeyPrefix(level, scope, 0, prefix);
  return prefix;
}

StoreKey buildStoreKey(LockLevel level, const KeyScope& scope,
                       const std::string& id) {
  StoreKey out;
  appendKeyPrefix(level, scope, id.size(), out.key);
  const std::size_t prefixSize = out.key.size();
  out.key.append(id);
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
    out.ancestors.push_back(out.key.substr(0, prefixSize + sep));
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
