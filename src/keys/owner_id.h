// The owner GUID of the calling thread, recorded on every lock row it takes.
#pragma once

#include <string>

namespace dlm::internal {

// A random GUID drawn once per thread (and again in a fork()ed child, which
// is a different owner).
const std::string& currentThreadOwner();

}  // namespace dlm::internal
