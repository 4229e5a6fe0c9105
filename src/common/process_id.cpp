#include "common/process_id.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace dlm::internal {
namespace {

std::atomic<pid_t> cachedPid{0};

void refreshInChild() { cachedPid.store(getpid(), std::memory_order_relaxed); }

}  // namespace

pid_t currentProcessId() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(nullptr, nullptr, refreshInChild);
    cachedPid.store(getpid(), std::memory_order_relaxed);
  });
  return cachedPid.load(std::memory_order_relaxed);
}

}  // namespace dlm::internal
