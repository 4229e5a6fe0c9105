// Empty files as signals between a test and its worker processes: a worker
// says it reached its target, the test tells every worker to stop.
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>

namespace dlm::test::contention {

// Creates `path` (empty), the signal.
inline void raiseSignalFile(const std::string& path) {
  std::ofstream(path).flush();
}

// Whether the signal `path` was raised.
inline bool signalFileRaised(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

}  // namespace dlm::test::contention
