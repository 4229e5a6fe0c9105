#include "common/store_limits.h"

#include <fmt/format.h>

#include "common/utf8.h"
#include "dlm/error.h"

namespace dlm::internal {

namespace {

// About this many bytes of a key are printed; a key is up to 8 KB by
// default and a message should stay one readable line.
constexpr std::size_t kKeyBytesShown = 96;

[[noreturn]] void refuse(std::string_view what, std::string_view column,
                         std::int64_t value) {
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     limitMessage(what, column, value));
}

}  // namespace

std::string quotedKeyForMessage(std::string_view key) {
  const bool utf8 = isValidUtf8(key);
  std::string out = "\"";
  std::size_t shown = 0;
  for (std::size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    // Stop at the first byte past the budget that starts a character, so a
    // kept UTF-8 sequence is never cut in two.
    if (shown >= kKeyBytesShown && (!utf8 || (c & 0xC0) != 0x80)) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7F || c == '"' || c == '\\' ||
        (c >= 0x80 && !utf8)) {
      out += fmt::format("\\x{:02X}", c);
      shown += 4;
    } else {
      out += static_cast<char>(c);
      ++shown;
    }
  }
  out += '"';
  return out;
}

std::string limitMessage(std::string_view what, std::string_view column,
                         std::int64_t value) {
  return fmt::format("dlm: {} (limit {} = {})", what, column, value);
}

void checkAcquireLimits(const StoreLimits& limits, const StoreKey& key,
                        std::chrono::milliseconds ttl) {
  checkTtlLimit(limits, ttl);
  checkKeyLimits(limits, key);
}

void checkKeyLimits(const StoreLimits& limits, const StoreKey& key) {
  const auto bytes = static_cast<std::int64_t>(key.key.size());
  if (bytes > limits.maxKeyBytes) {
    refuse(
        fmt::format("key {} has {} bytes", quotedKeyForMessage(key.key), bytes),
        "max_key_bytes", limits.maxKeyBytes);
  }
  const auto keys = static_cast<std::int64_t>(key.ancestors.size()) + 1;
  if (keys > limits.maxKeysPerCall) {
    refuse(fmt::format("{} keys in one call", keys), "max_keys_per_call",
           limits.maxKeysPerCall);
  }
}

void checkTtlLimit(const StoreLimits& limits, std::chrono::milliseconds ttl) {
  if (ttl.count() > limits.maxTtlMs) {
    refuse(fmt::format("a TTL of {} ms", ttl.count()), "max_ttl_ms",
           limits.maxTtlMs);
  }
}

void checkSharedHoldersLimit(const StoreLimits& limits, std::string_view key,
                             std::int64_t liveHolders) {
  if (liveHolders >= limits.maxSharedHoldersPerKey) {
    refuse(fmt::format("key {} has {} live SHARED holders",
                       quotedKeyForMessage(key), liveHolders),
           "max_shared_holders_per_key", limits.maxSharedHoldersPerKey);
  }
}

void checkRequestsPerOwnerLimit(const StoreLimits& limits,
                                std::int64_t liveRequests) {
  if (liveRequests >= limits.maxRequestsPerOwner) {
    refuse(fmt::format("owner has {} live requests", liveRequests),
           "max_requests_per_owner", limits.maxRequestsPerOwner);
  }
}

}  // namespace dlm::internal
