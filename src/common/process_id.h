// The calling process's id without a system call per use.
#pragma once

#include <sys/types.h>

namespace dlm::internal {

// getpid(), cached; a fork()ed child refreshes it (pthread_atfork) before
// fork() returns there. The owner GUID, the token generator and the holder
// pid use it on every acquisition, where three getpid() calls were a
// measurable share of the client's time.
pid_t currentProcessId();

}  // namespace dlm::internal
