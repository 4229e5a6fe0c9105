#include "sqlite/busy_wait.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <thread>

#include "dlm/deadline.h"

namespace dlm::internal::sqlite {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// Bounds of one sleep between attempts. Below ~50 us Linux's default timer
// slack rounds the sleep up anyway; above a few hundred microseconds a waiter
// starts missing the short gaps between another process's transactions.
constexpr microseconds kMinSleep{50};
constexpr microseconds kMaxSleep{250};

}  // namespace

BusyWait::BusyWait(milliseconds timeout)
    : timeout_(timeout), rng_(std::random_device{}() | 1U) {}

void BusyWait::install(sqlite3* db) {
  // Replaces any busy_timeout: only one busy handler is active per connection.
  sqlite3_busy_handler(db, &BusyWait::onBusy, this);
}

int BusyWait::onBusy(void* self, int attempt) {
  auto* wait = static_cast<BusyWait*>(self);
  const auto now = Clock::now();
  if (attempt == 0) {
    // Fixed for the whole wait: neither bound can change while this thread
    // is inside sqlite3_step, and reading them once keeps the polls cheap.
    wait->waitStarted_ = now;
    // The call's limit is the busy timeout counted from the call's start,
    // so it ends the wait "by the busy timeout" too. deadlineAfter
    // saturates: a busy timeout of years must not wrap the clock.
    wait->waitEnds_ = std::min(deadlineAfter(wait->timeout_), wait->callLimit_);
    wait->endsAtDeadline_ = false;
    const std::optional<Deadline> deadline = currentDeadline();
    if (deadline && *deadline < wait->waitEnds_) {
      wait->waitEnds_ = *deadline;
      wait->endsAtDeadline_ = true;
    }
  }
  if (now >= wait->waitEnds_) {
    wait->gaveUpAfter_ =
        std::chrono::duration_cast<milliseconds>(now - wait->waitStarted_);
    return 0;  // SQLite returns SQLITE_BUSY
  }
  std::this_thread::sleep_for(wait->nextSleep(
      std::chrono::duration_cast<microseconds>(wait->waitEnds_ - now)));
  return 1;
}

microseconds BusyWait::nextSleep(microseconds left) {
  // xorshift64: the jitter needs no quality, only to differ between waiters.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const auto span = static_cast<std::uint64_t>((kMaxSleep - kMinSleep).count());
  const microseconds sleep =
      kMinSleep +
      microseconds(static_cast<microseconds::rep>(rng_ % (span + 1)));
  // Never sleep past the wait's end; the attempt after it reports busy.
  // (duration_cast truncates, so `left` is never past it either.)
  return std::min(sleep, std::max(left, microseconds::zero()));
}

std::string BusyWait::describeLastWait() const {
  if (gaveUpAfter_ < milliseconds::zero()) {
    return fmt::format("busy timeout {} ms", timeout_.count());
  }
  return fmt::format(
      "waited {} ms for the database write lock ({}; busy timeout {} ms)",
      gaveUpAfter_.count(),
      endsAtDeadline_ ? "the call's deadline" : "the busy timeout",
      timeout_.count());
}

}  // namespace dlm::internal::sqlite
