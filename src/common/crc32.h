// CRC-32 (IEEE 802.3, the zlib polynomial) of a key, stored beside it in the
// lock table for operators and tools that look rows up by hash.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlm::internal {

std::uint32_t crc32(std::string_view bytes);

}  // namespace dlm::internal
