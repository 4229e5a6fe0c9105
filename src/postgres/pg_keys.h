// Key-range helpers for the PostgreSQL store's prefix queries.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dlm::internal {

// An exclusive upper bound U for the keys that start with `prefix`, so that
// `resource >= prefix AND resource < U` is an index range scan (C collation,
// byte order). U is valid UTF-8 whenever `prefix` is: trailing bytes >= 0x7F
// (whole multi-byte characters and DEL) are dropped and the last remaining
// ASCII byte is incremented. U may be looser than the tightest bound, so
// callers still filter with starts_with(). nullopt when no bound exists (empty
// prefix, or nothing but non-ASCII characters).
std::optional<std::string> prefixUpperBound(std::string_view prefix);

}  // namespace dlm::internal
