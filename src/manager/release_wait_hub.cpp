#include "manager/release_wait_hub.h"

namespace dlm::internal {

bool mayUnblock(const StoreKey& waiting, std::string_view released) {
  if (released == waiting.key) return true;
  for (const auto& a : waiting.ancestors) {
    if (released == a) return true;
  }
  return !waiting.descendantsBegin.empty() &&
         released >= waiting.descendantsBegin &&
         released < waiting.descendantsEnd;
}

ReleaseWaitHub::Registration::Registration(ReleaseWaitHub& hub, Waiter& waiter)
    : hub_(hub) {
  std::lock_guard<std::mutex> lock(hub_.mutex_);
  it_ = hub_.waiters_.insert(hub_.waiters_.end(), &waiter);
}

ReleaseWaitHub::Registration::~Registration() {
  std::lock_guard<std::mutex> lock(hub_.mutex_);
  hub_.waiters_.erase(it_);
}

int ReleaseWaitHub::rankOf(const Waiter& waiter) {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiter.rank;
}

void ReleaseWaitHub::released(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  int rank = 0;
  for (Waiter* w : waiters_) {
    if (!mayUnblock(w->key, key)) continue;
    w->rank = rank++;
    w->signal.notify();
  }
}

void ReleaseWaitHub::missedReleases() {
  std::lock_guard<std::mutex> lock(mutex_);
  int rank = 0;
  for (Waiter* w : waiters_) {
    w->rank = rank++;
    w->missed = true;
    w->signal.notify();
  }
  if (onMissed_) onMissed_();
}

void ReleaseWaitHub::onMissedReleases(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mutex_);
  onMissed_ = std::move(fn);
}

void ReleaseWaitHub::wakeAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Waiter* w : waiters_) w->signal.notify();
}

}  // namespace dlm::internal
