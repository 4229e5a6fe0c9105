// PostgreSQL array literals for text[] and bigint[] statement parameters,
// and the nullable bounds of a key's descendant range.
//
// The acquire call passes a key path as one text[] parameter (cast with
// $1::text[] in the statement), so the server parses these literals; every
// element is quoted, so keys may hold any character (keys never hold NUL).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlm::internal {

// '{"a","b"}': each element in double quotes, with '"' and '\' escaped by a
// backslash. '{}' for no elements.
std::string textArrayLiteral(const std::vector<std::string_view>& items);
// The same with SQL NULL for item i where isNull[i] (missing: not null).
std::string textArrayLiteral(const std::vector<std::string_view>& items,
                             const std::vector<bool>& isNull);

// '{1,-2,3}'; '{}' for no elements.
std::string bigintArrayLiteral(const std::vector<std::int64_t>& items);

// A bound of a descendant range as the dlm_* functions take it: NULL when
// empty (the hierarchy is off). Borrowed from `bound`.
inline const char* boundOrNull(const std::string& bound) {
  return bound.empty() ? nullptr : bound.c_str();
}

}  // namespace dlm::internal
