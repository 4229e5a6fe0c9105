// Fresh random text in GUID form (8-4-4-4-12 lowercase hex), for the tokens
// store calls take and for unique names. No state: fork()ed children draw
// their own.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>

namespace dlm::test {

inline std::string randomToken() {
  std::random_device source;
  const auto draw64 = [&source] {
    return (std::uint64_t{source()} << 32) | std::uint64_t{source()};
  };
  const std::uint64_t a = draw64();
  const std::uint64_t b = draw64();
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", a >> 32,
                     (a >> 16) & 0xffff, a & 0xffff, b >> 48,
                     b & 0xffffffffffffULL);
}

}  // namespace dlm::test
