#include "postgres/pg_keys.h"

namespace dlm::internal {

std::optional<std::string> prefixUpperBound(std::string_view prefix) {
  std::string bound(prefix);
  // Bytes of multi-byte UTF-8 characters are all >= 0x80; dropping them
  // keeps the bound on a character boundary, and incrementing 0x7F would
  // give a lone 0x80, which the server rejects as invalid UTF-8.
  while (!bound.empty() && static_cast<unsigned char>(bound.back()) >= 0x7F) {
    bound.pop_back();
  }
  if (bound.empty()) return std::nullopt;
  bound.back() = static_cast<char>(bound.back() + 1);
  return bound;
}

}  // namespace dlm::internal
