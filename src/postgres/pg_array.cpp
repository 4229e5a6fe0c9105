#include "postgres/pg_array.h"

namespace dlm::internal {

std::string textArrayLiteral(const std::vector<std::string_view>& items) {
  return textArrayLiteral(items, {});
}

std::string textArrayLiteral(const std::vector<std::string_view>& items,
                             const std::vector<bool>& isNull) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    if (i < isNull.size() && isNull[i]) {
      out += "NULL";
      continue;
    }
    // Always quote: an unquoted element would need its own rules for
    // whitespace, commas, braces and the word NULL.
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string bigintArrayLiteral(const std::vector<std::int64_t>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(items[i]);
  }
  out += '}';
  return out;
}

}  // namespace dlm::internal
