#include "owner_id.h"

#include <unistd.h>

#include "random_id.h"

namespace dlm::internal {

const std::string& currentThreadOwner() {
  thread_local std::string owner = randomUuid();
  thread_local pid_t drawnIn = getpid();
  if (pid_t pid = getpid(); pid != drawnIn) {
    owner = randomUuid();
    drawnIn = pid;
  }
  return owner;
}

}  // namespace dlm::internal
