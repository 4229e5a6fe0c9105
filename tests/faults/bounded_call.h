// Runs a library call that may hang (the bug the fault tests reproduce)
// without letting it hang the test: the call runs on its own thread; past
// its patience the test unblocks it (cuts the proxied connections, ends the
// transaction holding a row lock), and a call that still does not return
// ends the test process, since a hung test would hang the test command.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dlm/error.h"

namespace dlm::test::faults {

struct BoundedOutcome {
  // "OK", an ErrorCode name, or "NOT_DLM: <what>".
  std::string outcome;
  std::string message;
  double ms = 0;           // how long the call took
  bool unblocked = false;  // it had to be unblocked (it overran its patience)
};

inline BoundedOutcome boundedCall(
    const std::function<void()>& call, std::chrono::milliseconds patience,
    const std::function<void()>& unblock,
    std::chrono::milliseconds hardLimit = std::chrono::seconds(20)) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
    BoundedOutcome result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread worker([shared, &call] {
    BoundedOutcome r;
    const auto start = std::chrono::steady_clock::now();
    try {
      call();
      r.outcome = "OK";
    } catch (const DLMException& e) {
      r.outcome = std::string(toString(e.code()));
      r.message = e.what();
    } catch (const std::exception& e) {
      r.outcome = "NOT_DLM";
      r.message = e.what();
    }
    r.ms = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
               .count();
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->result = r;
    shared->done = true;
    shared->cv.notify_all();
  });
  bool unblocked = false;
  {
    std::unique_lock<std::mutex> lock(shared->mutex);
    if (!shared->cv.wait_for(lock, patience, [&] { return shared->done; })) {
      lock.unlock();
      unblock();
      unblocked = true;
      lock.lock();
      if (!shared->cv.wait_for(lock, hardLimit, [&] { return shared->done; })) {
        std::fprintf(stderr,
                     "FATAL: a call did not return %lld ms after being "
                     "unblocked; ending the test process\n",
                     static_cast<long long>(hardLimit.count()));
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
  }
  worker.join();
  BoundedOutcome r = shared->result;
  r.unblocked = unblocked;
  return r;
}

}  // namespace dlm::test::faults
