#include "dlm/deadline.h"

#include <algorithm>

namespace dlm {
namespace {

thread_local std::optional<Deadline> tCurrent;

}  // namespace

std::optional<Deadline> currentDeadline() noexcept { return tCurrent; }

Deadline deadlineAfter(std::chrono::milliseconds budget) noexcept {
  const Deadline now = std::chrono::steady_clock::now();
  if (budget <= std::chrono::milliseconds::zero()) return now;
  // Compare in the clock's own unit before adding: a budget of years must
  // saturate, not wrap.
  const auto room = Deadline::max() - now;
  if (std::chrono::duration_cast<std::chrono::milliseconds>(room) <= budget) {
    return Deadline::max();
  }
  return now + budget;
}

Deadline deadlineOr(std::chrono::milliseconds fallback) noexcept {
  if (tCurrent) return *tCurrent;
  return deadlineAfter(fallback);
}

std::chrono::milliseconds timeLeft(Deadline deadline) noexcept {
  const Deadline now = std::chrono::steady_clock::now();
  if (deadline <= now) return std::chrono::milliseconds::zero();
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

DeadlineScope::DeadlineScope(Deadline deadline) noexcept : previous_(tCurrent) {
  tCurrent = previous_ ? std::min(*previous_, deadline) : deadline;
}

DeadlineScope::~DeadlineScope() { tCurrent = previous_; }

}  // namespace dlm
