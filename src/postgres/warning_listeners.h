// The StoreWarningListeners of one store: added and removed by managers,
// told of each warning the store notices.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <vector>

#include "dlm/lock_store.h"

namespace dlm::internal {

class WarningListeners {
 public:
  void add(StoreWarningListener* listener) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      listeners_.push_back(listener);
    } catch (...) {
      // Out of memory: this listener hears no warnings; nothing else fails.
    }
  }

  // No call to `listener` is running or made once this returns.
  void remove(StoreWarningListener* listener) noexcept {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return delivering_ == 0; });
    listeners_.erase(
        std::remove(listeners_.begin(), listeners_.end(), listener),
        listeners_.end());
  }

  // Tells every listener, outside the registry's lock; what a listener
  // throws is dropped.
  void warn(std::string_view message) {
    std::vector<StoreWarningListener*> now;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      now = listeners_;
      ++delivering_;
    }
    for (StoreWarningListener* listener : now) {
      try {
        listener->storeWarning(message);
      } catch (...) {
        // A listener's failure is its own.
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --delivering_;
    }
    idle_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable idle_;
  std::vector<StoreWarningListener*> listeners_;
  int delivering_ = 0;
};

}  // namespace dlm::internal
