// dlmctl exec --verbose: the lock manager's events as lines on stderr
// ("waiting for lock ...: held ... by owner ... (host, pid)" when the wait
// starts and every --progress seconds; store errors and reconnections).
#pragma once

#include <atomic>

#include "dlm/lock_events.h"

namespace dlm::cli {

class WaitReporter final : public LockEventHandler {
 public:
  void onEvent(const LockEvent& event) override;
  // Whether a wait was reported (exec then reports the acquisition too).
  bool reported() const { return reported_.load(); }

 private:
  std::atomic<bool> reported_{false};
};

// What keeps a waiter out, as a WAITING event's blocker says it: "held MODE
// by owner O (host H, pid P) since T", "blocked by 'ID', held ...", or the
// earlier waiter that goes first.
std::string waitingBlockerText(const LockEvent& waiting);

}  // namespace dlm::cli
