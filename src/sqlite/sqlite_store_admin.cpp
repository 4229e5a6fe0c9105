// SqliteStore's inspection and admin side (LockStoreAdmin): the listings,
// which read one snapshot without the write lock, and the operator's
// writes (forceRelease, cancelRequests, purgeIdle).
#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlm/sqlite_store.h"
#include "sqlite/conflicts.h"
#include "sqlite/sqlite_purge.h"
#include "sqlite/sqlite_store_impl.h"
#include "sqlite/sqlite_wait_graph.h"
#include "sqlite/store_time.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::Durability;
using internal::sqlite::fromMs;
using internal::sqlite::nowMs;
using internal::sqlite::Statement;
using internal::sqlite::Transaction;
using std::chrono::milliseconds;

namespace {

// The smallest string greater than every string starting with `prefix`, or
// nullopt when there is none (the prefix is all 0xFF bytes).
std::optional<std::string> prefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last != 0xFF) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::nullopt;
}

// Column list shared by describe and listHeld; readRecord reads it.
#define DLM_RECORD_COLUMNS                                              \
  "resource, status, owner_id, fencing_token, acquired_at_ms, ttl_ms, " \
  "expires_at_ms, holder_host, holder_pid, holder_ip"

LockRecord readRecord(const Statement& row, std::int64_t now) {
  LockRecord r;
  r.key = row.text(0);
  r.statusHeld = row.text(1) == "HELD";
  r.owner = row.text(2);
  r.fencingToken = row.integer(3);
  r.acquiredAt = fromMs(row.integer(4));
  r.ttl = milliseconds(row.integer(5));
  r.expiresAt = fromMs(row.integer(6));
  r.held = r.statusHeld && row.integer(6) > now;
  r.holder.host = row.text(7);
  r.holder.pid = row.integer(8);
  // Never filled on SQLite (no network peer); NULL reads as "".
  r.holderIp = row.text(9);
  return r;
}

// Every hold, as DLM_RECORD_COLUMNS and the mode (column 10): the EXCLUSIVE
// rows with status HELD and the SHARED hold rows (status HELD while they
// exist) whose key satisfies `where` (the same text for both tables), each
// key's EXCLUSIVE holder first ('EXCLUSIVE' < 'SHARED'), then the SHARED
// ones oldest (lowest fencing token) first. One statement: one snapshot.
#define DLM_HOLDS_WHERE(where)                                       \
  "SELECT " DLM_RECORD_COLUMNS                                       \
  ", 'EXCLUSIVE' FROM dlm_locks WHERE status = 'HELD' AND " where    \
  " UNION ALL SELECT resource, 'HELD', owner_id, fencing_token, "    \
  "acquired_at_ms, ttl_ms, expires_at_ms, holder_host, holder_pid, " \
  "holder_ip, 'SHARED' FROM dlm_shared_holds WHERE " where           \
  " ORDER BY 1, 11, 4"

LockRecord readHold(const Statement& row, std::int64_t now) {
  LockRecord r = readRecord(row, now);
  r.mode = internal::sqlite::modeFromText(row.text(10));
  return r;
}

}  // namespace

std::vector<LockRecord> SqliteStore::holdersOf(std::string_view key) {
  return impl_->withConnection("listing holders", [&](Connection& c) {
    const std::int64_t now = nowMs();
    Statement rows = c.statement(DLM_HOLDS_WHERE("resource = ?1"));
    rows.bind(1, key);
    std::vector<LockRecord> out;
    while (rows.step()) out.push_back(readHold(rows, now));
    return out;
  });
}

std::optional<LockRecord> SqliteStore::describe(std::string_view key) {
  return impl_->withConnection(
      "describing", [&](Connection& c) -> std::optional<LockRecord> {
        const std::int64_t now = nowMs();
        // One statement reads one consistent snapshot; no transaction needed.
        // acquired_at_ms NULL: the row exists (an ancestor, or a blocked
        // attempt) but the key was never locked. (Not fencing_token = 0: since
        // schema version 3 a new row starts at the fencing floor.)
        Statement row =
            c.statement("SELECT " DLM_RECORD_COLUMNS
                        " FROM dlm_locks "
                        "WHERE resource = ?1 AND acquired_at_ms IS NOT NULL");
        row.bind(1, key);
        if (!row.step()) return std::nullopt;
        return readRecord(row, now);
      });
}

std::vector<LockRecord> SqliteStore::listHeld(std::string_view keyPrefix) {
  return impl_->withConnection("listing held locks", [&](Connection& c) {
    const std::int64_t now = nowMs();
    std::vector<LockRecord> out;
    const std::optional<std::string> end = prefixEnd(keyPrefix);
    // A primary-key range scan over the keys starting with the prefix, in
    // key order; without an upper bound (empty or all-0xFF prefix) a scan
    // from the prefix on, filtered below.
    Statement rows =
        end ? c.statement(DLM_HOLDS_WHERE("resource >= ?1 AND resource < ?2"))
            : c.statement(DLM_HOLDS_WHERE("resource >= ?1"));
    rows.bind(1, keyPrefix);
    if (end) rows.bind(2, *end);
    while (rows.step()) {
      LockRecord r = readHold(rows, now);
      if (r.key.compare(0, keyPrefix.size(), keyPrefix) == 0) {
        out.push_back(std::move(r));
      }
    }
    return out;
  });
}

std::vector<WaitRecord> SqliteStore::listWaiters(std::string_view keyPrefix) {
  return impl_->withConnection("listing waiters", [&](Connection& c) {
    const std::int64_t now = nowMs();
    std::vector<WaitRecord> out;
    const std::optional<std::string> end = prefixEnd(keyPrefix);
    // A range scan of the primary key (resource first), as for listHeld;
    // rows past their waiter's deadline no longer count.
    Statement rows =
        end ? c.statement(
                  "SELECT resource, owner_id, requested_at_ms, expires_at_ms, "
                  "mode, wait_until_ms FROM dlm_lock_requests "
                  "WHERE resource >= ?1 AND resource < ?2 "
                  "AND expires_at_ms > ?3 "
                  "ORDER BY resource, requested_at_ms, owner_id")
            : c.statement(
                  "SELECT resource, owner_id, requested_at_ms, expires_at_ms, "
                  "mode, wait_until_ms FROM dlm_lock_requests "
                  "WHERE resource >= ?1 AND expires_at_ms > ?3 "
                  "ORDER BY resource, requested_at_ms, owner_id");
    rows.bind(1, keyPrefix).bind(3, now);
    if (end) rows.bind(2, *end);
    while (rows.step()) {
      WaitRecord w;
      w.key = rows.text(0);
      if (w.key.compare(0, keyPrefix.size(), keyPrefix) != 0) continue;
      w.owner = rows.text(1);
      w.requestedAt = fromMs(rows.integer(2));
      w.expiresAt = fromMs(rows.integer(3));
      w.mode = internal::sqlite::modeFromText(rows.text(4));
      // NULL: no deadline recorded (none, or a library before schema 6).
      if (!rows.isNull(5)) w.deadline = fromMs(rows.integer(5));
      out.push_back(std::move(w));
    }
    return out;
  });
}

#undef DLM_HOLDS_WHERE

SchemaState SqliteStore::schemaState() { return impl_->schemaState(); }

PurgeBatch SqliteStore::purgeIdle(std::chrono::milliseconds idleFor,
                                  int batchSize, bool dryRun) {
  if (idleFor.count() < 0 || batchSize <= 0) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("purgeIdle: idleFor must not be negative ({} ms) and "
                    "batchSize must be positive ({})",
                    idleFor.count(), batchSize));
  }
  if (dryRun) {
    return impl_->withConnection("counting idle rows", [&](Connection& c) {
      return internal::sqlite::countIdleIn(c, idleFor, batchSize);
    });
  }
  return impl_->withConnection("purging idle rows", [&](Connection& c) {
    return internal::sqlite::purgeIdleIn(c, idleFor, batchSize);
  });
}

bool SqliteStore::forceRelease(std::string_view key) {
  const bool freed =
      impl_->withConnection("force-releasing", [&](Connection& c) {
        // Lazy like release: a lost force-release leaves the lock to its TTL.
        Transaction tx(c, Durability::kLazy);
        // Whoever holds it. The token stays, so a later takeover still makes
        // the old holder's release false.
        c.statement(
             "UPDATE dlm_locks SET status = 'FREE', "
             "expires_at_ms = min(expires_at_ms, ?2) "
             "WHERE resource = ?1 AND status = 'HELD'")
            .bind(1, key)
            .bind(2, nowMs())
            .run();
        bool changed = sqlite3_changes(c.handle()) > 0;
        // And every SHARED holder: their extensions and releases fail.
        c.statement("DELETE FROM dlm_shared_holds WHERE resource = ?1")
            .bind(1, key)
            .run();
        changed = sqlite3_changes(c.handle()) > 0 || changed;
        tx.commit();
        return changed;
      });
  if (freed) impl_->announce(key);
  return freed;
}

int SqliteStore::cancelRequests(std::string_view key,
                                std::optional<std::string_view> owner) {
  const int removed =
      impl_->withConnection("cancelling requests", [&](Connection& c) {
        return internal::sqlite::cancelRequestsIn(c, key, owner);
      });
  // The key's other waiters may have been queued behind a removed request:
  // wake them like a release does, after COMMIT and outside the mutex.
  if (removed > 0) impl_->announce(key);
  return removed;
}

#undef DLM_RECORD_COLUMNS

}  // namespace dlm
