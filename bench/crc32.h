// CRC-32 (IEEE 802.3, the zlib polynomial), the value the stores keep beside
// each key (resource_crc); the raw baselines write it as the library does.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace dlm_bench {

inline std::uint32_t crc32(std::string_view bytes) {
  static constexpr std::array<std::uint32_t, 256> kTable = [] {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int bit = 0; bit < 8; ++bit) {
        c = (c & 1U) ? (0xEDB88320U ^ (c >> 1)) : (c >> 1);
      }
      table[i] = c;
    }
    return table;
  }();
  std::uint32_t c = 0xFFFFFFFFU;
  for (unsigned char b : bytes) c = kTable[(c ^ b) & 0xFFU] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

}  // namespace dlm_bench
