// A LockEventHandler that keeps every event, for tests.
#pragma once

#include <algorithm>
#include <mutex>
#include <vector>

#include "dlm/lock_events.h"

namespace dlm::test {

class RecordedEvents final : public LockEventHandler {
 public:
  void onEvent(const LockEvent& event) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(event);
  }
  std::vector<LockEvent> all() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  std::vector<LockEvent> of(LockEventKind kind) const {
    std::vector<LockEvent> out;
    for (auto& e : all()) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::size_t count(LockEventKind kind) const { return of(kind).size(); }

 private:
  mutable std::mutex mutex_;
  std::vector<LockEvent> events_;
};

}  // namespace dlm::test
