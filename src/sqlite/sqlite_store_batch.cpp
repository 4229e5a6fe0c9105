// SqliteStore's batch calls: the work of several acquire, release or extend
// calls in one BEGIN IMMEDIATE transaction, so a batch waits once for the
// file's write lock and pays one COMMIT (one fsync when durable) instead of
// one per lock. Each lock runs the single call's own code (acquireWithin,
// releaseWithin, extendWithin) in that transaction, so its answer is the
// single call's; locks go in key order, answers come back in request order.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/key_order.h"
#include "dlm/error.h"
#include "dlm/sqlite_store.h"
#include "sqlite/sqlite_acquire.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_extend.h"
#include "sqlite/sqlite_release.h"
#include "sqlite/sqlite_store_impl.h"
#include "sqlite/store_time.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::Durability;
using internal::sqlite::Savepoint;
using internal::sqlite::Transaction;

namespace {

// Whether `e`, thrown while one lock of a batch was worked on, refuses that
// lock alone: its request is over a cap of dlm_limits (the only error of a
// lock's own that SQLite has: no tenancy, no clients). Anything else is the
// store's failure (busy past the deadline, I/O, a lost file, a missing
// schema) and fails the whole batch.
bool refusesItsLockAlone(const DLMException& e) {
  return e.code() == ErrorCode::INVALID_ARGUMENT && !e.transient();
}

// Runs one lock's `work` of a batch under a savepoint: the lock's own
// error, with everything the work wrote for it undone, or nullopt when it
// ran. Throws what fails the batch.
template <typename Work>
std::optional<DLMException> oneLockOfBatch(Connection& c, Work&& work) {
  Savepoint savepoint(c);
  try {
    work();
  } catch (const DLMException& e) {
    // SQLite may have rolled the whole transaction back by itself: then
    // the other locks' work is gone too.
    if (!refusesItsLockAlone(e) || sqlite3_get_autocommit(c.handle()) != 0) {
      throw;
    }
    savepoint.rollback();
    return e;
  }
  savepoint.release();
  return std::nullopt;
}

}  // namespace

std::vector<AcquireOutcome> SqliteStore::tryAcquireEach(
    const std::vector<AcquireRequest>& requests) {
  std::vector<AcquireOutcome> outcomes(requests.size());
  if (requests.empty()) return outcomes;
  const auto order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
  impl_->withConnection("acquiring a batch", [&](Connection& c) {
    // Durable, as a single acquisition: a granted token must survive a
    // power loss.
    Transaction tx(c, Durability::kDurable);
    for (const std::size_t i : order) {
      outcomes[i].error = oneLockOfBatch(c, [&] {
        outcomes[i].result = internal::sqlite::acquireWithin(
            c, requests[i], impl_->tokenFloor());
      });
    }
    tx.commit();
    for (const AcquireOutcome& outcome : outcomes) {
      if (outcome.result.acquired) impl_->sawToken(outcome.result.fencingToken);
    }
    return 0;
  });
  return outcomes;
}

std::vector<ReleaseOutcome> SqliteStore::releaseEach(
    const std::vector<ReleaseRequest>& requests) {
  std::vector<ReleaseOutcome> outcomes(requests.size());
  if (requests.empty()) return outcomes;
  const auto order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
  std::vector<std::string> freed;
  impl_->withConnection("releasing a batch", [&](Connection& c) {
    // Lazy, as a single release: a release lost on power loss only keeps
    // its lock until the TTL.
    Transaction tx(c, Durability::kLazy);
    for (const std::size_t i : order) {
      const ReleaseRequest& r = requests[i];
      outcomes[i].error = oneLockOfBatch(c, [&] {
        const auto done =
            internal::sqlite::releaseWithin(c, r.key.key, r.token, r.mode);
        outcomes[i].released = done.released;
        if (done.freed) freed.push_back(r.key.key);
      });
    }
    tx.commit();
    return 0;
  });
  // After COMMIT and outside the connection mutex, as a single release
  // wakes: a woken waiter's attempt finds the rows free.
  impl_->announceAll(freed);
  return outcomes;
}

std::vector<ExtendOutcome> SqliteStore::extendEach(
    const std::vector<ExtendRequest>& requests) {
  std::vector<ExtendOutcome> outcomes(requests.size());
  if (requests.empty()) return outcomes;
  const auto order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key; });
  impl_->withConnection("extending a batch", [&](Connection& c) {
    Transaction tx(c, Durability::kDurable);
    for (const std::size_t i : order) {
      const ExtendRequest& r = requests[i];
      outcomes[i].error = oneLockOfBatch(c, [&] {
        const auto expires =
            internal::sqlite::extendWithin(c, r.key, r.token, r.ttl, r.mode);
        if (expires) outcomes[i].expiresAt = internal::sqlite::fromMs(*expires);
      });
    }
    tx.commit();
    return 0;
  });
  return outcomes;
}

AcquireAllResult SqliteStore::tryAcquireAll(
    const std::vector<AcquireRequest>& requests) {
  AcquireAllResult all;
  all.results.resize(requests.size());
  if (requests.empty()) {
    all.acquired = true;  // every one of none, as LockStore's default says
    return all;
  }
  const auto order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
  impl_->withConnection("acquiring all of a batch", [&](Connection& c) {
    Transaction tx(c, Durability::kDurable);
    for (const std::size_t i : order) {
      // An error of any lock leaves by the Transaction, which rolls every
      // lock back.
      AcquireResult result =
          internal::sqlite::acquireWithin(c, requests[i], impl_->tokenFloor());
      if (!result.acquired) {
        // None: the Transaction rolls back the locks taken before this
        // one (and the rows this attempt made).
        AcquireAllResult refused;
        refused.results.resize(requests.size());
        refused.blockedBy = std::move(result.blockedBy);
        refused.queued = result.queued;
        all = std::move(refused);
        return 0;
      }
      all.results[i] = std::move(result);
    }
    tx.commit();
    all.acquired = true;
    for (const AcquireResult& result : all.results) {
      impl_->sawToken(result.fencingToken);
    }
    return 0;
  });
  return all;
}

}  // namespace dlm
