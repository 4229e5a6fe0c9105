// A std::thread that joins when destroyed, so a failing assertion that
// leaves a test early does not terminate the whole test program.
#pragma once

#include <thread>
#include <utility>

namespace dlm::test {

class JoiningThread {
 public:
  template <typename... Args>
  explicit JoiningThread(Args&&... args)
      : thread_(std::forward<Args>(args)...) {}
  ~JoiningThread() { join(); }
  JoiningThread(const JoiningThread&) = delete;
  JoiningThread& operator=(const JoiningThread&) = delete;
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
};

}  // namespace dlm::test
