// UTF-8 checks and a printable form of bytes that may not be UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// Well-formed UTF-8: no overlong forms, surrogates or code points past
// U+10FFFF.
bool isValidUtf8(std::string_view bytes);

// `bytes` for a message: kept as they are when valid UTF-8 without control
// characters, otherwise every control byte and every byte of 0x80 or more
// as \xNN.
std::string printableBytes(std::string_view bytes);

}  // namespace dlm::internal
