// Random identifiers: owner GUIDs and per-acquisition tokens.
#pragma once

#include <string>

namespace dlm::internal {

// A random version-4 UUID in its 36-character text form. Thread-safe; each
// thread draws from its own generator seeded from std::random_device.
std::string randomUuid();

// Uniform in [0, 1), from the same per-thread generator (for jitter).
double randomFraction();

}  // namespace dlm::internal
