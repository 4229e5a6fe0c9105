// Argument checks shared by the manager and its builder. Each throws
// DLMException(INVALID_ARGUMENT) with a message naming the argument; none does
// I/O.
#pragma once

#include <chrono>
#include <string_view>

#include "common/utf8.h"
#include "dlm/lock_key.h"

namespace dlm::internal {

inline constexpr std::size_t kMaxIdBytes = kMaxLockIdBytes;
inline constexpr std::size_t kMaxScopeBytes = kMaxScopeNameBytes;

// Non-empty, at most kMaxIdBytes, no NUL, valid UTF-8 (PostgreSQL text
// columns hold only valid UTF-8, and both stores must accept the same ids).
void validateLockId(std::string_view id);

// clientId / farmId: at most kMaxScopeBytes, no NUL or '#', valid UTF-8;
// non-empty when `required`.
void validateScopeName(std::string_view what, std::string_view value,
                       bool required);

void requirePositive(std::string_view what, std::chrono::milliseconds value);
void requireNonNegative(std::string_view what, std::chrono::milliseconds value);


}  // namespace dlm::internal
