// Waiting in tests for something another thread, process or the server does.
#pragma once

#include <chrono>
#include <thread>

namespace dlm::test {

// Polls `pred` every `poll` until it holds or `limit` has passed; the result
// of the last poll.
template <typename Pred>
bool eventually(
    Pred&& pred, std::chrono::milliseconds limit = std::chrono::seconds(10),
    std::chrono::milliseconds poll = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(poll);
  }
  return pred();
}

}  // namespace dlm::test
