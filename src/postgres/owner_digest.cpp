#include "postgres/owner_digest.h"

#include <openssl/evp.h>

#include <array>

#include "dlm/error.h"

namespace dlm::internal {

namespace {
constexpr std::size_t kShownBytes = 16;  // 32 hex digits
}  // namespace

std::string pgOwnerDigest(std::string_view owner) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(owner.data(), owner.size(), digest.data(), &length,
                 EVP_sha256(), nullptr) != 1 ||
      length < kShownBytes) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "SHA-256 of an owner could not be computed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * kShownBytes);
  for (std::size_t i = 0; i < kShownBytes; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0x0f]);
  }
  return out;
}

}  // namespace dlm::internal
