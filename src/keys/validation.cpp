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

bool isValidUtf8(std::string_view bytes) {
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    std::size_t extra = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;  // truncated sequence
    for (std::size_t k = 1; k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, UTF-16 surrogates and code points past U+10FFFF.
    static constexpr std::uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

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
