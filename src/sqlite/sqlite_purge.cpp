#include "sqlite/sqlite_purge.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sqlite/store_time.h"

namespace dlm::internal::sqlite {

namespace {

// The rows purgeIdle may delete, ?1 = the idle cutoff (now - idleFor),
// ?2 = now, ?3 = the batch size:
// - idle since at least the cutoff: its lease ended by then
//   (expires_at_ms <= cutoff; a row released earlier has been FREE even
//   longer, one released after expiry was expired, which counts as idle), or
//   it was never acquired (an intention row of an ancestor or of a blocked
//   attempt: nothing protects anything through it);
// - not waited for by a live request row (its waiter will take it soon);
// - without SHARED holds: the purge deletes the stale ones first (those
//   expired by the cutoff, DLM_STALE_SHARED), a key with any hold left is
//   not idle (?4 = the shared holds' expiry that still counts: the cutoff
//   for a dry run, which deletes nothing first, and no bound when purging);
// in key order, so that successive batches walk the table the same way.
// A scan of the table (no index on expires_at_ms: acquisitions would pay for
// its upkeep on every write to serve an occasional admin call); the batch
// size bounds how long the write lock is held, not the scan's length.
#define DLM_IDLE_ROWS                                                        \
  "FROM dlm_locks AS l "                                                     \
  "WHERE (l.expires_at_ms <= ?1 "                                            \
  "       OR (l.acquired_at_ms IS NULL AND l.status = 'FREE')) "             \
  "AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests AS r "                    \
  "                WHERE r.resource = l.resource AND r.expires_at_ms > ?2) " \
  "AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds AS s "                     \
  "                WHERE s.resource = l.resource AND s.expires_at_ms > ?4) " \
  "ORDER BY l.resource LIMIT ?3"

// Request rows whose lease ended at least idleFor ago (?1 = the cutoff):
// their waiters crashed or left without unregistering (a live waiter renews
// its row every kRequestLease / 2). Oldest first, at most ?2; through the
// index dlm_lock_requests_expiry (schema version 5), so the cost is the
// batch's, not the table's.
#define DLM_ENDED_REQUESTS                            \
  "FROM dlm_lock_requests WHERE expires_at_ms <= ?1 " \
  "ORDER BY expires_at_ms LIMIT ?2"

// SHARED holds expired for at least idleFor (?1 = the cutoff), in key
// order, at most ?2. Their tokens are never above their key row's counter,
// so deleting them leaves the fencing floor rule to the key rows.
#define DLM_STALE_SHARED                             \
  "FROM dlm_shared_holds WHERE expires_at_ms <= ?1 " \
  "ORDER BY resource, token LIMIT ?2"

// The idle cutoff (now - idleFor), saturated: an idle age beyond the epoch
// leaves only the never-acquired rows.
std::int64_t idleCutoff(std::int64_t now, std::chrono::milliseconds idleFor) {
  return idleFor.count() > now ? std::numeric_limits<std::int64_t>::min()
                               : now - idleFor.count();
}

}  // namespace

PurgeBatch countIdleIn(Connection& c, std::chrono::milliseconds idleFor,
                       int batchSize) {
  const std::int64_t now = nowMs();
  // Ended requests, stale SHARED holds and the key rows idle once they
  // are gone, up to the batch size (a purge deletes the requests first,
  // then the holds, then key rows up to what is left of the batch).
  Statement count =
      c.statement("SELECT (SELECT count(*) FROM (SELECT 1 " DLM_IDLE_ROWS
                  ")) + (SELECT count(*) FROM (SELECT 1 FROM dlm_shared_holds "
                  "WHERE expires_at_ms <= ?1 LIMIT ?3)) "
                  "+ (SELECT count(*) FROM (SELECT 1 FROM dlm_lock_requests "
                  "WHERE expires_at_ms <= ?1 LIMIT ?3)), "
                  "(SELECT fencing_token FROM dlm_fencing_floor WHERE id = 1)");
  count.bind(1, idleCutoff(now, idleFor))
      .bind(2, now)
      .bind(3, static_cast<std::int64_t>(batchSize))
      .bind(4, idleCutoff(now, idleFor));
  if (!count.step()) c.fail(SQLITE_INTERNAL, "counting idle rows");
  PurgeBatch batch;
  batch.rows = std::min<std::int64_t>(count.integer(0), batchSize);
  batch.fencingFloor = count.integer(1);
  return batch;
}

PurgeBatch purgeIdleIn(Connection& c, std::chrono::milliseconds idleFor,
                       int batchSize) {
  // BEGIN IMMEDIATE: no acquisition runs between choosing the rows,
  // raising the floor and deleting them. Durable like an acquisition,
  // though losing it would be safe too (the rows would come back with
  // their tokens).
  Transaction tx(c, Durability::kDurable);
  const std::int64_t now = nowMs();  // after the wait for the write lock
  std::int64_t deleted = 0;
  // Ended requests first (as on PostgreSQL): they block nothing, and a
  // crashed fleet's leftovers go before anything else.
  {
    std::vector<std::pair<std::string, std::string>> ended;
    {
      Statement requests =
          c.statement("SELECT resource, owner_id " DLM_ENDED_REQUESTS);
      requests.bind(1, idleCutoff(now, idleFor))
          .bind(2, static_cast<std::int64_t>(batchSize));
      while (requests.step()) {
        ended.emplace_back(requests.text(0), requests.text(1));
      }
    }
    for (const auto& [resource, owner] : ended) {
      c.statement(
           "DELETE FROM dlm_lock_requests "
           "WHERE resource = ?1 AND owner_id = ?2")
          .bind(1, resource)
          .bind(2, owner)
          .run();
    }
    deleted += static_cast<std::int64_t>(ended.size());
  }
  // Stale SHARED holds next, so that their keys can be idle below.
  std::vector<std::pair<std::string, std::string>> stale;
  if (deleted < batchSize) {
    Statement holds = c.statement("SELECT resource, token " DLM_STALE_SHARED);
    holds.bind(1, idleCutoff(now, idleFor)).bind(2, batchSize - deleted);
    while (holds.step()) stale.emplace_back(holds.text(0), holds.text(1));
  }
  for (const auto& [resource, token] : stale) {
    c.statement(
         "DELETE FROM dlm_shared_holds WHERE resource = ?1 AND token = ?2")
        .bind(1, resource)
        .bind(2, token)
        .run();
  }
  deleted += static_cast<std::int64_t>(stale.size());
  const std::int64_t rowsLeft = batchSize - deleted;
  std::vector<std::string> keys;
  std::int64_t highest = 0;
  if (rowsLeft > 0) {
    Statement idle =
        c.statement("SELECT l.resource, l.fencing_token " DLM_IDLE_ROWS);
    // Any SHARED hold left (live, or stale beyond this batch) keeps its
    // key: no bound on its expiry counts.
    idle.bind(1, idleCutoff(now, idleFor))
        .bind(2, now)
        .bind(3, rowsLeft)
        .bind(4, std::numeric_limits<std::int64_t>::min());
    while (idle.step()) {
      keys.push_back(idle.text(0));
      highest = std::max(highest, idle.integer(1));
    }
  }
  // The floor first: every row created from now on starts at it
  // (trigger dlm_locks_start_at_fencing_floor), so a deleted key's next
  // token is above every token it issued. Never lowered.
  c.statement(
       "UPDATE dlm_fencing_floor SET fencing_token = max(fencing_token, ?1) "
       "WHERE id = 1")
      .bind(1, highest)
      .run();
  for (const auto& key : keys) {
    c.statement("DELETE FROM dlm_locks WHERE resource = ?1").bind(1, key).run();
  }
  PurgeBatch batch;
  {
    Statement floor =
        c.statement("SELECT fencing_token FROM dlm_fencing_floor WHERE id = 1");
    if (!floor.step()) {
      c.fail(SQLITE_CORRUPT,
             "reading dlm_fencing_floor (its one row is missing)");
    }
    batch.fencingFloor = floor.integer(0);
  }
  tx.commit();
  batch.rows = deleted + static_cast<std::int64_t>(keys.size());
  return batch;
}

#undef DLM_IDLE_ROWS
#undef DLM_STALE_SHARED
#undef DLM_ENDED_REQUESTS

}  // namespace dlm::internal::sqlite
