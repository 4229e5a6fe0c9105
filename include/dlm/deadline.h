// Deadlines of store calls: how the manager bounds the time a store may take.
//
// Every store call the manager makes runs inside a DeadlineScope (from the
// call's time budget, see LockConfiguration::operationTimeout). A store reads
// currentDeadline() and returns, or throws a transient CONNECTION_ERROR, by
// then: connecting, waiting for a pooled connection or a lock of the
// database, and waiting for the server's answer all count. Code that calls a
// store directly may open its own scope; without one, a store applies its
// own default bound.
#pragma once

#include <chrono>
#include <optional>

#include "dlm/export.h"

namespace dlm {

// Deadlines are instants of the monotonic clock, never the wall clock.
using Deadline = std::chrono::steady_clock::time_point;

// The deadline of the calling thread's innermost DeadlineScope, or nullopt
// when none is open.
DLM_API std::optional<Deadline> currentDeadline() noexcept;

// `budget` from now, saturated so that no budget overflows the clock.
DLM_API Deadline deadlineAfter(std::chrono::milliseconds budget) noexcept;

// currentDeadline(), or `fallback` from now when no scope is open.
DLM_API Deadline deadlineOr(std::chrono::milliseconds fallback) noexcept;

// The time left until `deadline`, rounded up to whole milliseconds; zero
// when it has passed.
DLM_API std::chrono::milliseconds timeLeft(Deadline deadline) noexcept;

// Sets the calling thread's deadline while it lives; the previous one comes
// back when it ends. A scope opened inside another never extends it: the
// earlier of the two deadlines applies. Not movable; lives on the stack of
// the thread that made it.
class DLM_API DeadlineScope {
 public:
  explicit DeadlineScope(Deadline deadline) noexcept;
  ~DeadlineScope();
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  std::optional<Deadline> previous_;
};

}  // namespace dlm
