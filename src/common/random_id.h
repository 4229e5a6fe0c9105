// Random identifiers: owner GUIDs and per-acquisition tokens, from the
// operating system's secure random source. A token is what a release or an
// extension proves its right with, so it must not be guessable from others.
#pragma once

#include <string>

namespace dlm::internal {

// 128 random bits from getrandom(2) in GUID text form (8-4-4-4-12 lowercase
// hex, 36 characters). Every bit is random: not an RFC 4122 version-4 UUID,
// which fixes 6 of them. Thread-safe (the bits are read ahead per thread,
// 512 bytes at a time) and fork-safe (a child never hands out bits read
// before it was forked). Throws INTERNAL_ERROR if the kernel has no random
// source to give.
std::string randomGuid();

// Uniform in [0, 1), from a per-thread generator seeded once from the OS (for
// jitter, where predictability does not matter).
double randomFraction();

}  // namespace dlm::internal
