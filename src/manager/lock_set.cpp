// DistributedLockManager's calls on several locks at once: tryAcquireAll,
// acquireAll (all or none, one store call per attempt) and releaseAll (one
// store call).
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/random_id.h"
#include "common/process_id.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_store.h"
#include "keys/owner_id.h"
#include "keys/validation.h"
#include "manager/in_doubt_resolver.h"
#include "manager/manager_impl.h"
#include "manager/messages.h"
#include "telemetry/telemetry.h"

namespace dlm {

using std::chrono::milliseconds;

namespace {

// The several-lock calls' own checks, before any I/O.
void checkLockSet(const std::vector<Lock*>& locks) {
  if (locks.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "acquireAll/tryAcquireAll: no locks given");
  }
  std::set<std::string> keys;
  for (const Lock* lock : locks) {
    if (lock == nullptr) {
      throw DLMException(ErrorCode::INVALID_ARGUMENT,
                         "acquireAll/tryAcquireAll: a null Lock");
    }
    if (!keys.insert(lock->key()).second) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("acquireAll/tryAcquireAll: lock '{}' given twice",
                      lock->key()));
    }
  }
}

std::string setRefusal(const std::vector<Lock*>& locks,
                       const std::string& blockedBy, bool queued) {
  return fmt::format(
      "{} locks ({}{}) not taken: {} {}", locks.size(), locks.front()->key(),
      locks.size() > 1 ? ", ..." : "",
      queued ? "an older waiter is queued for" : "held elsewhere:",
      blockedBy.empty() ? std::string("(unknown)")
                        : fmt::format("'{}'", blockedBy));
}

}  // namespace

bool DistributedLockManager::Impl::attemptAll(const std::vector<Lock*>& locks,
                                              milliseconds ttl,
                                              Refusal* refusal,
                                              Deadline deadline) {
  const std::string& owner = internal::currentThreadOwner();
  const Holder holder{holder_.host,
                      static_cast<std::int64_t>(internal::currentProcessId())};
  std::vector<std::string> tokens;
  std::vector<AcquireRequest> requests;
  tokens.reserve(locks.size());
  requests.reserve(locks.size());
  for (std::size_t i = 0; i < locks.size(); ++i) {
    tokens.push_back(internal::randomGuid());
  }
  for (std::size_t i = 0; i < locks.size(); ++i) {
    requests.push_back(AcquireRequest{locks[i]->key_, owner, tokens[i], ttl,
                                      holder, locks[i]->mode_});
  }
  const auto started = std::chrono::steady_clock::now();
  ++refusal->attempts;
  AcquireAllResult result;
  try {
    result = withStoreRetries(locks.front(), deadline,
                              [&] { return store().tryAcquireAll(requests); });
  } catch (const DLMException& e) {
    // Each may have been committed with its reply lost: freed by token
    // once the store answers again.
    if (e.code() == ErrorCode::CONNECTION_ERROR ||
        e.code() == ErrorCode::RETRIES_EXHAUSTED) {
      for (std::size_t i = 0; i < locks.size(); ++i) {
        resolver_->addInDoubt(locks[i]->key_, locks[i]->mode_, tokens[i],
                              owner, ttl);
      }
    }
    throw;
  }
  if (!result.acquired) {
    refusal->blockedBy = result.blockedBy;
    refusal->queued = result.queued;
    telemetry_->refused();
    return false;
  }
  for (std::size_t i = 0; i < locks.size(); ++i) {
    holdAcquired(*locks[i], owner, tokens[i], result.results[i], started, ttl);
  }
  return true;
}

std::size_t DistributedLockManager::Impl::releaseAllByToken(
    const std::vector<Lock*>& locks) {
  requireInitialized();
  std::vector<Lock*> held;
  for (Lock* lock : locks) {
    if (lock != nullptr && lock->isAcquired()) held.push_back(lock);
  }
  std::size_t freedCount = 0;
  // A release made through commitLock goes its own way (its transaction).
  for (Lock* lock : locks) {
    if (lock != nullptr && lock->isReleasePending() && releaseByToken(*lock)) {
      ++freedCount;
    }
  }
  if (held.empty()) return freedCount;
  const auto callStart = std::chrono::steady_clock::now();
  std::vector<ReleaseRequest> requests;
  requests.reserve(held.size());
  for (const Lock* lock : held) {
    requests.push_back(ReleaseRequest{lock->key_, lock->token_, lock->mode_});
  }
  bool mayHaveRun = false;
  // A lock whose own call was cut off (transient) makes the whole call be
  // tried again: releases by token are safe to repeat.
  const std::vector<ReleaseOutcome> outcomes =
      withStoreRetries(held.front(), callDeadline(), [&] {
        try {
          std::vector<ReleaseOutcome> out = store().releaseEach(requests);
          for (const ReleaseOutcome& o : out) {
            if (o.error && o.error->transient()) throw *o.error;
          }
          return out;
        } catch (const DLMException& e) {
          mayHaveRun = mayHaveRun || e.transient();
          throw;
        }
      });
  std::optional<DLMException> firstError;
  for (std::size_t i = 0; i < held.size(); ++i) {
    Lock& lock = *held[i];
    if (outcomes[i].error) {
      if (!firstError) firstError = outcomes[i].error;
      continue;
    }
    const auto ttl = std::chrono::duration_cast<milliseconds>(lock.expiresAt_ -
                                                              lock.acquiredAt_);
    bool freed = outcomes[i].released;
    // As releaseByToken: a repeat that finds the key taken since was freed
    // by the earlier try whose reply was lost.
    if (!freed && mayHaveRun && callStart < lock.leaseEnd_) freed = true;
    settleRelease(lock, freed, ttl, callStart);
    if (freed) ++freedCount;
  }
  if (firstError) throw *firstError;
  return freedCount;
}

void DistributedLockManager::tryAcquireAll(const std::vector<Lock*>& locks) {
  tryAcquireAll(locks, impl_->config().lockTtl);
}

void DistributedLockManager::tryAcquireAll(const std::vector<Lock*>& locks,
                                           milliseconds ttl) {
  acquireAll(locks, ttl, milliseconds::zero());
}

void DistributedLockManager::acquireAll(const std::vector<Lock*>& locks) {
  acquireAll(locks, impl_->config().lockTtl, impl_->config().waitForLock);
}

void DistributedLockManager::acquireAll(const std::vector<Lock*>& locks,
                                        milliseconds ttl) {
  acquireAll(locks, ttl, impl_->config().waitForLock);
}

void DistributedLockManager::acquireAll(const std::vector<Lock*>& locks,
                                        milliseconds ttl,
                                        milliseconds timeout) {
  checkLockSet(locks);
  for (Lock* lock : locks) {
    impl_->checkOwnLock(*lock);
    if (lock->isAcquired()) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("acquireAll/tryAcquireAll: {} is already held",
                      internal::lockName(*lock)));
    }
  }
  internal::validateTtl(ttl);
  internal::requireNonNegative("timeout", timeout);
  impl_->requireInitialized();
  const Deadline waitEnd = deadlineAfter(timeout);
  const Deadline callEnd = impl_->waitingCallDeadline(timeout);
  const auto callStart = std::chrono::steady_clock::now();
  Impl::Refusal refusal;
  for (;;) {
    const Deadline attemptEnd = std::min(callEnd, impl_->callDeadline());
    if (impl_->attemptAll(locks, ttl, &refusal, attemptEnd)) break;
    const milliseconds left = timeLeft(waitEnd);
    if (left == milliseconds::zero() || impl_->waitsStopped()) {
      throw DLMException(
          ErrorCode::LOCK_UNAVAILABLE,
          setRefusal(locks, refusal.blockedBy, refusal.queued));
    }
    impl_->clock().sleepFor(
        std::min(impl_->config().sleepBetweenRetries, left));
  }
  for (const Lock* lock : locks) {
    impl_->reportAcquired(*lock, callStart, refusal.attempts);
  }
}

std::size_t DistributedLockManager::releaseAll(const std::vector<Lock*>& locks) {
  for (Lock* lock : locks) {
    if (lock != nullptr) impl_->checkOwnLock(*lock);
  }
  return impl_->releaseAllByToken(locks);
}

}  // namespace dlm
