#include "manager/keep_alive.h"

#include <fmt/format.h>

#include <algorithm>

#include "dlm/deadline.h"
#include "telemetry/telemetry.h"

namespace dlm::internal {
namespace {

using std::chrono::milliseconds;

milliseconds renewalPeriod(milliseconds ttl) {
  return std::max(milliseconds(1), ttl / 3);
}

// After a transient failure, try again soon, but often enough to have
// several tries before the lease runs out.
milliseconds retryPeriod(milliseconds ttl) {
  return std::clamp(ttl / 10, milliseconds(1), milliseconds(1000));
}

}  // namespace

milliseconds lossMargin(milliseconds ttl) {
  return std::clamp(ttl / 10, milliseconds(20), milliseconds(2000));
}

KeepAlive::~KeepAlive() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<KeepAliveEntry> KeepAlive::add(
    StoreKey key, LockMode mode, std::string token, milliseconds ttl,
    StoreTime expiresAt, SteadyTime leaseEnd, std::string lockId,
    std::int64_t fencingToken, LostCallback onLost) {
  auto entry = std::make_shared<KeepAliveEntry>();
  entry->key = std::move(key);
  entry->mode = mode;
  entry->token = std::move(token);
  entry->ttl = ttl;
  entry->lockName = fmt::format("lock '{}'", entry->key.key);
  entry->lockId = std::move(lockId);
  entry->fencingToken = fencingToken;
  entry->acquiredAt = leaseEnd - ttl;
  entry->onLost = std::move(onLost);
  entry->expiresAt = expiresAt;
  entry->leaseEnd = leaseEnd;
  entry->nextRenewal = leaseEnd - ttl + renewalPeriod(ttl);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(entry);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
  return entry;
}

void KeepAlive::remove(const std::shared_ptr<KeepAliveEntry>& entry) {
  {
    std::unique_lock<std::mutex> lock(entry->mutex);
    entry->cancelled = true;
    // A renewal in progress ends by its deadline.
    entry->idle.wait(lock, [&] { return !entry->renewing; });
  }
  // Waits for an onLost callback in progress.
  { std::lock_guard<std::mutex> dispatch(dispatchMutex_); }
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(std::remove(entries_.begin(), entries_.end(), entry),
                 entries_.end());
}

void KeepAlive::renewAllNow() {
  const SteadyTime now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& e : entries_) {
      std::lock_guard<std::mutex> entryLock(e->mutex);
      e->nextRenewal = std::min(e->nextRenewal, now);
    }
  }
  changed_.notify_all();
}

std::vector<KeepAlive::Renewal> KeepAlive::renewAll(
    const std::vector<std::shared_ptr<KeepAliveEntry>>& due,
    SteadyTime deadline) {
  std::vector<Renewal> renewals;
  std::vector<ExtendRequest> requests;
  for (const auto& e : due) {
    std::lock_guard<std::mutex> lock(e->mutex);
    if (e->cancelled || e->lost) continue;
    e->renewing = true;
    renewals.push_back(Renewal{e, false, false});
  }
  // The entries' keys and tokens do not change while they are renewing.
  requests.reserve(renewals.size());
  for (const Renewal& r : renewals) {
    requests.push_back(ExtendRequest{r.entry->key.key, r.entry->token,
                                     r.entry->ttl, r.entry->mode});
  }
  if (renewals.empty()) return renewals;
  const SteadyTime started = std::chrono::steady_clock::now();
  std::vector<ExtendOutcome> outcomes(renewals.size());
  try {
    // One call for every lease due (the store's batch; no manager-level
    // retries here: a failed renewal is simply tried again at the next
    // retry period while the lease lasts).
    const DeadlineScope scope(deadline);
    if (requests.size() > 1) {
      outcomes = store_.extendEach(requests);
    } else {
      const ExtendRequest& r = requests.front();
      outcomes[0].expiresAt = store_.extend(r.key, r.token, r.ttl, r.mode);
    }
  } catch (const DLMException& ex) {
    for (ExtendOutcome& o : outcomes) {
      o.expiresAt.reset();
      o.error = ex;
    }
  }
  const SteadyTime now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < renewals.size(); ++i) {
    KeepAliveEntry& e = *renewals[i].entry;
    const ExtendOutcome& o = outcomes[i];
    const bool failed = o.error.has_value();
    const bool transient = failed && o.error->transient();
    if (failed) emitStoreError(e, *o.error);
    {
      std::lock_guard<std::mutex> lock(e.mutex);
      e.renewing = false;
      if (!failed && o.expiresAt) {
        renewals[i].renewed = true;
        e.expiresAt = *o.expiresAt;
        e.leaseEnd = started + e.ttl;
        e.nextRenewal = started + renewalPeriod(e.ttl);
      } else if (transient && now + retryPeriod(e.ttl) < e.lossAt()) {
        e.nextRenewal = now + retryPeriod(e.ttl);
      } else if (transient && now < e.lossAt()) {
        // One last try right before the loss time.
        e.nextRenewal = e.lossAt();
      } else {
        e.lost = !e.cancelled;
        renewals[i].lost = e.lost;
      }
    }
    e.idle.notify_all();
  }
  return renewals;
}

void KeepAlive::emit(const KeepAliveEntry& e, LockEventKind kind) {
  if (telemetry_ == nullptr) return;
  if (kind == LockEventKind::LEASE_RENEWED) {
    telemetry_->renewed();
  } else {
    telemetry_->leaseLost();
  }
  if (!telemetry_->reporting()) return;
  LockEvent event;
  event.kind = kind;
  event.lockId = e.lockId;
  event.key = e.key.key;
  event.mode = e.mode;
  event.fencingToken = e.fencingToken;
  event.heldFor = std::chrono::duration_cast<milliseconds>(
      std::chrono::steady_clock::now() - e.acquiredAt);
  telemetry_->emit(event);
}

void KeepAlive::emitStoreError(const KeepAliveEntry& e,
                               const DLMException& why) noexcept try {
  if (telemetry_ == nullptr) return;
  LockEvent event;
  event.lockId = e.lockId;
  event.key = e.key.key;
  event.mode = e.mode;
  event.fencingToken = e.fencingToken;
  telemetry_->storeFailed(
      why, std::move(event),
      fmt::format("renewing {}: {}", e.lockName, why.what()));
} catch (...) {
  // Out of memory: the renewal's outcome matters more than its report.
}

bool KeepAlive::reportLost(KeepAliveEntry& e) {
  std::lock_guard<std::mutex> dispatch(dispatchMutex_);
  {
    std::lock_guard<std::mutex> entryLock(e.mutex);
    if (e.cancelled) return false;
  }
  if (!e.onLost) return true;
  const DLMException why(
      ErrorCode::LOCK_NOT_HELD,
      fmt::format("{} was lost: its lease could not be renewed", e.lockName));
  try {
    e.onLost(why);
  } catch (...) {
    // A callback's exception has nowhere to go on this thread.
  }
  return true;
}

void KeepAlive::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    SteadyTime wake = SteadyTime::max();
    // The earliest loss time of all leases: no renewal may run past it, so
    // a hung store call never delays another lease's loss report.
    SteadyTime earliestLoss = SteadyTime::max();
    std::vector<std::shared_ptr<KeepAliveEntry>> due;
    std::vector<std::shared_ptr<KeepAliveEntry>> expired;
    std::vector<std::shared_ptr<KeepAliveEntry>> soon;
    const SteadyTime now = std::chrono::steady_clock::now();
    for (const auto& e : entries_) {
      std::lock_guard<std::mutex> entryLock(e->mutex);
      if (e->lost || e->cancelled) continue;
      if (e->lossAt() <= now) {
        e->lost = true;
        expired.push_back(e);
        continue;
      }
      earliestLoss = std::min(earliestLoss, e->lossAt());
      if (e->nextRenewal <= now) {
        due.push_back(e);
      } else {
        if (e->nextRenewal <= now + renewalPeriod(e->ttl) / 4) {
          soon.push_back(e);
        }
        wake = std::min({wake, e->nextRenewal, e->lossAt()});
      }
    }
    // Leases due within a quarter of their renewal period go with those due
    // now: one call renews them all, instead of a call for each as their
    // times come one by one (renewing a little early costs nothing).
    if (!due.empty()) due.insert(due.end(), soon.begin(), soon.end());
    if (due.empty() && expired.empty()) {
      if (wake == SteadyTime::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, wake);
      }
      continue;
    }
    // Store calls and callbacks without the list lock: add/remove stay
    // quick.
    lock.unlock();
    // Events after the callbacks, with no lock held (reportLost holds the
    // dispatch mutex while onLost runs).
    for (const auto& e : expired) {
      if (reportLost(*e)) emit(*e, LockEventKind::LEASE_LOST);
    }
    const SteadyTime deadline =
        std::min(deadlineAfter(operationTimeout_), earliestLoss);
    for (const Renewal& r : renewAll(due, deadline)) {
      if (r.lost) {
        if (reportLost(*r.entry)) emit(*r.entry, LockEventKind::LEASE_LOST);
      } else if (r.renewed) {
        emit(*r.entry, LockEventKind::LEASE_RENEWED);
      }
    }
    lock.lock();
    // Lost entries need no more renewals.
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [](const auto& e) {
                                    std::lock_guard<std::mutex> l(e->mutex);
                                    return e->lost;
                                  }),
                   entries_.end());
  }
}

}  // namespace dlm::internal
