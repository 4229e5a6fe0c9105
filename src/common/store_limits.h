// The caps a DBA sets in the store's dlm_limits table (SQLite schema
// version 5, PostgreSQL version 8), and the one form of the message that
// refuses a call over one of them, so that tests can match it on every
// store: "dlm: <what> (limit <column> = <value>)". The stores enforce the
// caps inside their own transactions; the PostgreSQL functions raise the
// same messages in SQL.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlm/store_key.h"

namespace dlm::internal {

// One row of dlm_limits. The defaults are the columns' defaults in the
// migrations.
struct StoreLimits {
  std::int64_t maxTtlMs = 31536000000;  // 365 days
  std::int64_t maxKeyBytes = 8192;
  std::int64_t maxKeysPerCall = 64;
  std::int64_t maxRequestsPerOwner = 100;
  std::int64_t maxSharedHoldersPerKey = 1000;
};

// `key` quoted for a message: control bytes, '"', '\' and (when the key is
// not valid UTF-8) every byte of 0x80 or more escaped as \xNN, and cut
// after about 100 bytes of output ("..." marks the cut). Never cuts inside
// a UTF-8 sequence.
std::string quotedKeyForMessage(std::string_view key);

// "dlm: <what> (limit <column> = <value>)".
std::string limitMessage(std::string_view what, std::string_view column,
                         std::int64_t value);

// Each throws DLMException(INVALID_ARGUMENT, limitMessage(...)) when the
// call is over the cap, and returns otherwise.
//
// An acquire: its TTL, the bytes of its scoped key, and how many keys it
// touches (the key and its ancestors).
void checkAcquireLimits(const StoreLimits& limits, const StoreKey& key,
                        std::chrono::milliseconds ttl);
// A wait's key: the bytes of its scoped key and how many keys it touches.
void checkKeyLimits(const StoreLimits& limits, const StoreKey& key);
// An extension's TTL.
void checkTtlLimit(const StoreLimits& limits, std::chrono::milliseconds ttl);
// A SHARED grant on `key`, which has `liveHolders` live SHARED holds
// already.
void checkSharedHoldersLimit(const StoreLimits& limits, std::string_view key,
                             std::int64_t liveHolders);
// A wait registered by an owner with `liveRequests` live requests for other
// keys already. The owner is a secret: the message does not name it.
void checkRequestsPerOwnerLimit(const StoreLimits& limits,
                                std::int64_t liveRequests);

}  // namespace dlm::internal
