// Conflict checks of the SQLite store: each is one statement of primary-key
// lookups and range scans (the key, each ancestor through IN over the JSON
// array, the descendant range), tagged with the group the blocking key falls
// in so that the order is the key, the ancestors root first (an ancestor is
// a prefix of the next one, so key order is root first), the descendants in
// key order.
#include "sqlite/conflicts.h"

namespace dlm::internal::sqlite {

std::string ancestorsJson(Connection& c, const std::vector<std::string>& keys) {
  std::string json = "[]";
  for (const auto& key : keys) {
    Statement append = c.statement("SELECT json_insert(?1, '$[#]', ?2)");
    append.bind(1, json).bind(2, key);
    if (!append.step()) c.fail(SQLITE_INTERNAL, "building the ancestors list");
    json = append.text(0);
  }
  return json;
}

std::string_view modeText(LockMode mode) { return lockModeName(mode); }

LockMode modeFromText(std::string_view text) {
  // The column's CHECK allows only these two; NULL (read as "") cannot occur.
  return text == "SHARED" ? LockMode::SHARED : LockMode::EXCLUSIVE;
}

namespace {

// Binds ?1..?6 the way both statements below use them.
void bindPath(Statement& s, const PathKey& path, LockMode mode,
              std::int64_t now) {
  s.bind(1, path.key).bind(2, now).bind(3, path.ancestors);
  s.bind(4, path.descendantsBegin).bind(5, path.descendantsEnd);
  // 1 when the wanted mode is EXCLUSIVE: then SHARED holds and SHARED
  // requests are in its way too.
  s.bind(6, static_cast<std::int64_t>(mode == LockMode::EXCLUSIVE ? 1 : 0));
}

}  // namespace

// ?1 key, ?2 now, ?3 ancestors (JSON), ?4/?5 descendant range, ?6 wanted
// mode is EXCLUSIVE, ?7 limit. Within a key, holds oldest (lowest fencing
// token) first.
#define DLM_LIVE_EXCLUSIVE " AND status = 'HELD' AND expires_at_ms > ?2 "
#define DLM_LIVE_SHARED " AND ?6 AND expires_at_ms > ?2 "
#define DLM_HOLD_COLUMNS " resource, owner_id, fencing_token "
static const char kConflictingHolds[] =
    "SELECT resource, owner_id FROM ("
    "SELECT 0 AS grp," DLM_HOLD_COLUMNS
    "FROM dlm_locks WHERE resource = ?1" DLM_LIVE_EXCLUSIVE
    "UNION ALL SELECT 0," DLM_HOLD_COLUMNS
    "FROM dlm_shared_holds WHERE resource = ?1" DLM_LIVE_SHARED
    "UNION ALL SELECT 1," DLM_HOLD_COLUMNS
    "FROM dlm_locks WHERE resource IN (SELECT value FROM "
    "json_each(?3))" DLM_LIVE_EXCLUSIVE "UNION ALL SELECT 1," DLM_HOLD_COLUMNS
    "FROM dlm_shared_holds WHERE resource IN (SELECT value FROM "
    "json_each(?3))" DLM_LIVE_SHARED "UNION ALL SELECT 2," DLM_HOLD_COLUMNS
    "FROM dlm_locks WHERE resource >= ?4 AND resource < ?5" DLM_LIVE_EXCLUSIVE
    "UNION ALL SELECT 2," DLM_HOLD_COLUMNS
    "FROM dlm_shared_holds WHERE resource >= ?4 AND resource < "
    "?5" DLM_LIVE_SHARED ") ORDER BY grp, resource, fencing_token LIMIT ?7";
#undef DLM_LIVE_EXCLUSIVE
#undef DLM_LIVE_SHARED
#undef DLM_HOLD_COLUMNS

std::vector<Conflict> conflictingHolds(Connection& c, const PathKey& path,
                                       LockMode mode, std::int64_t now,
                                       std::int64_t limit) {
  Statement rows = c.statement(kConflictingHolds);
  bindPath(rows, path, mode, now);
  rows.bind(7, limit);
  std::vector<Conflict> out;
  while (rows.step()) out.push_back(Conflict{rows.text(1), rows.text(0)});
  return out;
}

// ?1..?6 as above, ?7 the asking owner, ?8/?9 its place in the queue (?8
// NULL: none, every conflicting request is older), ?10 limit. A request
// conflicts when either side is EXCLUSIVE.
#define DLM_OLDER_CONFLICTING                   \
  " AND expires_at_ms > ?2 AND owner_id <> ?7 " \
  "AND (?6 OR mode = 'EXCLUSIVE') "             \
  "AND (?8 IS NULL OR requested_at_ms < ?8 "    \
  "     OR (requested_at_ms = ?8 AND owner_id < ?9)) "
#define DLM_REQUEST_COLUMNS " resource, owner_id, requested_at_ms "
static const char kOlderConflictingRequests[] =
    "SELECT resource, owner_id FROM ("
    "SELECT 0 AS grp," DLM_REQUEST_COLUMNS
    "FROM dlm_lock_requests WHERE resource = ?1" DLM_OLDER_CONFLICTING
    "UNION ALL SELECT 1," DLM_REQUEST_COLUMNS
    "FROM dlm_lock_requests WHERE resource IN (SELECT value FROM "
    "json_each(?3))" DLM_OLDER_CONFLICTING
    "UNION ALL SELECT 2," DLM_REQUEST_COLUMNS
    "FROM dlm_lock_requests WHERE resource >= ?4 AND resource < "
    "?5" DLM_OLDER_CONFLICTING
    ") ORDER BY grp, resource, requested_at_ms, owner_id LIMIT ?10";
#undef DLM_OLDER_CONFLICTING
#undef DLM_REQUEST_COLUMNS

std::vector<Conflict> olderConflictingRequests(
    Connection& c, const PathKey& path, LockMode mode, std::string_view owner,
    const std::optional<QueuePlace>& place, std::int64_t now,
    std::int64_t limit) {
  Statement rows = c.statement(kOlderConflictingRequests);
  bindPath(rows, path, mode, now);
  rows.bind(7, owner);
  if (place) {
    rows.bind(8, place->requestedAt).bind(9, place->owner);
  } else {
    rows.bindNull(8).bindNull(9);
  }
  rows.bind(10, limit);
  std::vector<Conflict> out;
  while (rows.step()) out.push_back(Conflict{rows.text(1), rows.text(0)});
  return out;
}

std::optional<QueuePlace> requestPlace(Connection& c, std::string_view key,
                                       std::string_view owner,
                                       std::int64_t now) {
  Statement row = c.statement(
      "SELECT requested_at_ms FROM dlm_lock_requests "
      "WHERE resource = ?1 AND owner_id = ?2 AND expires_at_ms > ?3");
  row.bind(1, key).bind(2, owner).bind(3, now);
  if (!row.step()) return std::nullopt;
  return QueuePlace{row.integer(0), std::string(owner)};
}

}  // namespace dlm::internal::sqlite
