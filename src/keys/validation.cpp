#include "keys/validation.h"

#include <fmt/format.h>

#include <cstdint>

#include "dlm/error.h"

namespace dlm::internal {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw DLMException(ErrorCode::INVALID_ARGUMENT, message);
}

}  // namespace

void validateLockId(std::string_view id) {
  if (id.empty()) invalid("lock id is empty");
  if (id.size() > kMaxIdBytes) {
    invalid(fmt::format("lock id is {} bytes; at most {} are allowed",
                        id.size(), kMaxIdBytes));
  }
  if (id.find('\0') != std::string_view::npos) {
    invalid("lock id contains a NUL byte");
  }
  if (!isValidUtf8(id)) invalid("lock id is not valid UTF-8");
}

void validateScopeName(std::string_view what, std::string_view value,
                       bool required) {
  if (value.empty()) {
    if (required) invalid(fmt::format("{} is empty", what));
    return;
  }
  if (value.size() > kMaxScopeBytes) {
    invalid(fmt::format("{} is {} bytes; at most {} are allowed", what,
                        value.size(), kMaxScopeBytes));
  }
  if (value.find('\0') != std::string_view::npos) {
    invalid(fmt::format("{} contains a NUL byte", what));
  }
  if (value.find('#') != std::string_view::npos) {
    invalid(
        fmt::format("{} '{}' contains '#', the key separator", what, value));
  }
  if (!isValidUtf8(value)) invalid(fmt::format("{} is not valid UTF-8", what));
}

void requirePositive(std::string_view what, std::chrono::milliseconds value) {
  if (value.count() <= 0) {
    invalid(fmt::format("{} must be positive, got {} ms", what, value.count()));
  }
}

void requireNonNegative(std::string_view what,
                        std::chrono::milliseconds value) {
  if (value.count() < 0) {
    invalid(
        fmt::format("{} must not be negative, got {} ms", what, value.count()));
  }
}

}  // namespace dlm::internal
