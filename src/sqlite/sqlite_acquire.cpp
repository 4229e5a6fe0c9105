#include "sqlite/sqlite_acquire.h"

#include <algorithm>
#include <string>

#include "common/crc32.h"
#include "sqlite/conflicts.h"
#include "sqlite/cycle_sql.h"
#include "sqlite/sqlite_limits.h"
#include "sqlite/store_time.h"

namespace dlm::internal::sqlite {

namespace {

// The rows must exist before they are checked and updated; ancestor rows
// keep the table the same as PostgreSQL's (where they are row-locked). An
// existing row is left untouched and costs no write.
void ensureRow(Connection& c, const std::string& resource) {
  c.statement(sql::kEnsureRow)
      .bind(1, resource)
      .bind(2, static_cast<std::int64_t>(internal::crc32(resource)))
      .run();
}

// A retry with the token that already holds the key (the reply of an earlier
// attempt was lost): that acquisition, reported unchanged. Expired but not
// taken over counts, as for release.
bool findRetried(Connection& c, const AcquireRequest& request,
                 AcquireResult& result) {
  Statement row = c.statement(request.mode == LockMode::SHARED
                                  ? sql::kFindRetriedShared
                                  : sql::kFindRetriedExclusive);
  row.bind(1, request.key.key).bind(2, request.token);
  if (!row.step()) return false;
  result.acquired = true;
  result.fencingToken = row.integer(0);
  result.acquiredAt = fromMs(row.integer(1));
  result.expiresAt = fromMs(row.integer(2));
  return true;
}

// The key's next fencing token: one more than its counter, and above every
// token a purged row issued (the floor; a row created since the purge starts
// at the floor anyway, this also covers rows that existed before it).
std::int64_t nextFencingToken(Connection& c, const std::string& key) {
  Statement row = c.statement(sql::kLastFencingToken);
  row.bind(1, key);
  if (!row.step()) c.fail(SQLITE_INTERNAL, "reading the inserted row");
  return row.integer(0) + 1;
}

void grantExclusive(Connection& c, const AcquireRequest& request,
                    std::int64_t fencing, std::int64_t now,
                    std::int64_t expires) {
  c.statement(sql::kGrantExclusive)
      .bind(1, request.key.key)
      .bind(2, request.owner)
      .bind(3, request.token)
      .bind(4, fencing)
      .bind(5, now)
      .bind(6, static_cast<std::int64_t>(request.ttl.count()))
      .bind(7, expires)
      .bind(8, request.holder.host)
      .bind(9, request.holder.pid)
      .run();
  // The key's SHARED holds are all expired (a live one would have blocked
  // this attempt): taken over, so their extensions and releases fail.
  c.statement(sql::kDeleteSharedHolds).bind(1, request.key.key).run();
}

void grantShared(Connection& c, const AcquireRequest& request,
                 std::int64_t fencing, std::int64_t now, std::int64_t expires) {
  // The counter moves; an expired EXCLUSIVE holder (a live one would have
  // blocked this attempt) is taken over: the row becomes FREE without its
  // token, so that holder's release is false and its extension fails, and
  // its lease ends now at the latest (purge judges idleness from it).
  c.statement(sql::kGrantSharedKeyRow)
      .bind(1, request.key.key)
      .bind(2, fencing)
      .bind(3, now)
      .run();
  c.statement(sql::kInsertSharedHold)
      .bind(1, request.key.key)
      .bind(2, request.token)
      .bind(3, request.owner)
      .bind(4, fencing)
      .bind(5, now)
      .bind(6, static_cast<std::int64_t>(request.ttl.count()))
      .bind(7, expires)
      .bind(8, request.holder.host)
      .bind(9, request.holder.pid)
      .run();
}

// Expired holds of other keys (ancestors, descendants) in the attempt's way
// are taken over as the key's own are: otherwise their holders could still
// extend them, and two conflicting holds would be live at once.
void takeOverOtherHolds(Connection& c, const PathKey& path, LockMode mode,
                        std::int64_t now) {
  c.statement(sql::kTakeOverOtherHolds)
      .bind(1, now)
      .bind(2, path.ancestors)
      .bind(3, path.descendantsBegin)
      .bind(4, path.descendantsEnd)
      .run();
  if (mode == LockMode::EXCLUSIVE) {
    c.statement(sql::kTakeOverOtherSharedHolds)
        .bind(1, path.ancestors)
        .bind(2, path.descendantsBegin)
        .bind(3, path.descendantsEnd)
        .run();
  }
}

}  // namespace

AcquireResult acquireWithin(Connection& c, const AcquireRequest& request,
                            std::int64_t tokenFloor) {
  const StoreKey& key = request.key;
  AcquireResult result;
  // Read the clock once the write lock is ours: BEGIN IMMEDIATE may have
  // waited for it, and the lease starts now, not when we asked.
  const std::int64_t now = nowMs();
  // The DBA's caps, as of this transaction (dlm_limits).
  const StoreLimits limits = readLimits(c);

  // A retry is answered as the acquisition it repeats, whatever the caps
  // say now (a DBA may have lowered one since): the lock is held either way.
  if (findRetried(c, request, result)) return result;  // nothing changed
  // Over a cap, nothing is written: checked before the rows are made.
  checkAcquireLimits(limits, key, request.ttl);

  for (const auto& ancestor : key.ancestors) ensureRow(c, ancestor);
  ensureRow(c, key.key);

  const PathKey path{key.key, ancestorsJson(c, key.ancestors),
                     key.descendantsBegin, key.descendantsEnd};
  // A live hold in the way: the key itself, an ancestor (root first) or a
  // descendant (key order) reported.
  if (auto holds = conflictingHolds(c, path, request.mode, now, 1);
      !holds.empty()) {
    result.blockedBy = std::move(holds.front().key);
    return result;
  }
  // Fair queueing: an older live request of another owner in the way goes
  // first. Older than this owner's own request for the key, or any when it
  // has none (a first attempt, a tryAcquireLock).
  const auto place = requestPlace(c, key.key, request.owner, now);
  if (auto queued = olderConflictingRequests(c, path, request.mode,
                                             request.owner, place, now, 1);
      !queued.empty()) {
    result.queued = true;
    result.blockedBy = std::move(queued.front().key);
    return result;
  }

  // One more SHARED holder than the cap allows is refused. A retry of a
  // holder was answered above; every live hold counted here is another
  // acquisition's.
  if (request.mode == LockMode::SHARED) {
    checkSharedHoldersLimit(
        limits, key.key,
        liveSharedHolds(c, key.key, now, limits.maxSharedHoldersPerKey));
  }

  // Grant. A waiter's request for the key ends with it, in this
  // transaction: a holder whose request row lingered until its separate
  // unregister call would queue others behind itself, and the wait-for graph
  // would see its old request wait for the newer requests it blocks.
  if (place) {
    c.statement(sql::kDeleteOwnRequest)
        .bind(1, key.key)
        .bind(2, request.owner)
        .run();
  }
  takeOverOtherHolds(c, path, request.mode, now);
  // The counter read here cannot change before COMMIT: this transaction
  // holds the file's write lock. Above the store's floor too: in a file
  // that replaced a lost one, the key's row may start lower than the tokens
  // this store already returned.
  const std::int64_t fencing =
      std::max(nextFencingToken(c, key.key), tokenFloor + 1);
  const std::int64_t expires = expiryMs(now, request.ttl);
  if (request.mode == LockMode::SHARED) {
    grantShared(c, request, fencing, now, expires);
  } else {
    grantExclusive(c, request, fencing, now, expires);
  }
  result.acquired = true;
  result.fencingToken = fencing;
  result.acquiredAt = fromMs(now);
  result.expiresAt = fromMs(expires);
  return result;
}

AcquireResult acquireIn(Connection& c, const AcquireRequest& request,
                        std::int64_t tokenFloor) {
  Transaction tx(c, Durability::kDurable);
  AcquireResult result = acquireWithin(c, request, tokenFloor);
  // A refused attempt commits too: the rows it made for the key and its
  // ancestors stay (they change nothing that anyone holds).
  tx.commit();
  return result;
}

}  // namespace dlm::internal::sqlite
