// What the PostgreSQL schema keeps and shows of an owner (schema version 7
// on): a digest, so that a listing cannot be used to act as that owner.
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// The first 32 hex digits of SHA-256 of `owner`'s bytes, as the server's
// dlm_owner_digest computes them.
std::string pgOwnerDigest(std::string_view owner);

}  // namespace dlm::internal
