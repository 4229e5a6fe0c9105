#include "sqlite/busy_wait.h"

#include <algorithm>
#include <random>
#include <thread>

namespace dlm::internal::sqlite {
namespace {

using std::chrono::microseconds;

// Bounds of one sleep between attempts. Below ~50 us Linux's default timer
// slack rounds the sleep up anyway; above a few hundred microseconds a waiter
// starts missing the short gaps between another process's transactions.
constexpr microseconds kMinSleep{50};
constexpr microseconds kMaxSleep{250};

}  // namespace

BusyWait::BusyWait(std::chrono::milliseconds timeout)
    : timeout_(timeout), rng_(std::random_device{}() | 1U) {}

void BusyWait::install(sqlite3* db) {
  // Replaces any busy_timeout: only one busy handler is active per connection.
  sqlite3_busy_handler(db, &BusyWait::onBusy, this);
}

int BusyWait::onBusy(void* self, int attempt) {
  auto* wait = static_cast<BusyWait*>(self);
  const auto now = std::chrono::steady_clock::now();
  if (attempt == 0) wait->waitStarted_ = now;
  const auto left = wait->timeout_ - (now - wait->waitStarted_);
  if (left <= microseconds::zero()) return 0;  // SQLite returns SQLITE_BUSY
  std::this_thread::sleep_for(
      wait->nextSleep(std::chrono::duration_cast<microseconds>(left)));
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
  // Never sleep past the deadline; the attempt after it reports busy.
  return std::min(sleep, left);
}

}  // namespace dlm::internal::sqlite
