// The SQL text of the SQLite store's acquisition (sqlite_acquire.cpp,
// conflicts.cpp) and release (sqlite_release.cpp), in one place. The
// benchmark's raw sqlite3 baseline runs these too (bench/CMakeLists.txt
// makes its header from this file). Each is an inline constant: one address
// program-wide, which is what Connection::statement caches prepared
// statements by.
#pragma once

namespace dlm::internal::sqlite::sql {

// ?1 key, ?2 its crc32. An existing row is left untouched (no write).
inline constexpr char kEnsureRow[] =
    "INSERT OR IGNORE INTO dlm_locks (resource, resource_crc) "
    "VALUES (?1, ?2)";

// The caps of dlm_limits (schema version 5), read inside every acquire,
// extend and registerWait transaction: one primary-key lookup, so a DBA's
// UPDATE applies to the next call.
inline constexpr char kReadLimits[] =
    "SELECT max_ttl_ms, max_key_bytes, max_keys_per_call, "
    "max_requests_per_owner, max_shared_holders_per_key "
    "FROM dlm_limits WHERE id = 1";

// ?1 key, ?2 now, ?3 the cap: the key's live SHARED holds, counted up to the
// cap (a primary-key range over the key's own rows, stopped at the cap).
inline constexpr char kLiveSharedHolds[] =
    "SELECT count(*) FROM (SELECT 1 FROM dlm_shared_holds "
    "WHERE resource = ?1 AND expires_at_ms > ?2 LIMIT ?3)";

// ?1 key, ?2 token: the acquisition this token already holds (a retry).
inline constexpr char kFindRetriedShared[] =
    "SELECT fencing_token, acquired_at_ms, expires_at_ms "
    "FROM dlm_shared_holds WHERE resource = ?1 AND token = ?2";
inline constexpr char kFindRetriedExclusive[] =
    "SELECT fencing_token, acquired_at_ms, expires_at_ms "
    "FROM dlm_locks "
    "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'";

// ?1 a JSON array, ?2 a string: the array with the string appended.
inline constexpr char kJsonAppend[] = "SELECT json_insert(?1, '$[#]', ?2)";

// ?1 key, ?2 now, ?3 ancestors (JSON), ?4/?5 descendant range, ?6 wanted
// mode is EXCLUSIVE. Rows: group (0 the key, 1 an ancestor, 2 a
// descendant), key, owner, fencing token; unordered (conflicts.cpp sorts
// them). No ORDER BY and no IN (SELECT ...): either would make SQLite build
// a temporary b-tree on every run, each a fresh page-cache allocation
// (~80 KiB, faulted in again whenever malloc has returned it to the system).
// The ancestors are a join driving primary-key lookups from json_each
// instead (they are distinct, so it yields what IN would).
#define DLM_LIVE_EXCLUSIVE " AND status = 'HELD' AND expires_at_ms > ?2 "
#define DLM_LIVE_SHARED " AND ?6 AND expires_at_ms > ?2 "
#define DLM_HOLD_COLUMNS " resource, owner_id, fencing_token "
inline constexpr char kConflictingHolds[] =
    "SELECT 0," DLM_HOLD_COLUMNS
    "FROM dlm_locks WHERE resource = ?1" DLM_LIVE_EXCLUSIVE
    "UNION ALL SELECT 0," DLM_HOLD_COLUMNS
    "FROM dlm_shared_holds WHERE resource = ?1" DLM_LIVE_SHARED
    "UNION ALL SELECT 1," DLM_HOLD_COLUMNS
    "FROM json_each(?3) AS a CROSS JOIN dlm_locks "
    "WHERE resource = a.value" DLM_LIVE_EXCLUSIVE
    "UNION ALL SELECT 1," DLM_HOLD_COLUMNS
    "FROM json_each(?3) AS a CROSS JOIN dlm_shared_holds "
    "WHERE resource = a.value" DLM_LIVE_SHARED
    "UNION ALL SELECT 2," DLM_HOLD_COLUMNS
    "FROM dlm_locks WHERE resource >= ?4 AND resource < ?5" DLM_LIVE_EXCLUSIVE
    "UNION ALL SELECT 2," DLM_HOLD_COLUMNS
    "FROM dlm_shared_holds WHERE resource >= ?4 AND resource < "
    "?5" DLM_LIVE_SHARED;
#undef DLM_LIVE_EXCLUSIVE
#undef DLM_LIVE_SHARED
#undef DLM_HOLD_COLUMNS

// ?1..?6 as above, ?7 the asking owner, ?8/?9 its place in the queue (?8
// NULL: none, every conflicting request is older). A request conflicts when
// either side is EXCLUSIVE. Rows: group, key, owner, request time;
// unordered, as above.
#define DLM_OLDER_CONFLICTING                   \
  " AND expires_at_ms > ?2 AND owner_id <> ?7 " \
  "AND (?6 OR mode = 'EXCLUSIVE') "             \
  "AND (?8 IS NULL OR requested_at_ms < ?8 "    \
  "     OR (requested_at_ms = ?8 AND owner_id < ?9)) "
#define DLM_REQUEST_COLUMNS " resource, owner_id, requested_at_ms "
inline constexpr char kOlderConflictingRequests[] =
    "SELECT 0," DLM_REQUEST_COLUMNS
    "FROM dlm_lock_requests WHERE resource = ?1" DLM_OLDER_CONFLICTING
    "UNION ALL SELECT 1," DLM_REQUEST_COLUMNS
    "FROM json_each(?3) AS a CROSS JOIN dlm_lock_requests "
    "WHERE resource = a.value" DLM_OLDER_CONFLICTING
    "UNION ALL SELECT 2," DLM_REQUEST_COLUMNS
    "FROM dlm_lock_requests WHERE resource >= ?4 AND resource < "
    "?5" DLM_OLDER_CONFLICTING;
#undef DLM_OLDER_CONFLICTING
#undef DLM_REQUEST_COLUMNS

// ?1 key, ?2 owner, ?3 now: the owner's live request for the key.
inline constexpr char kRequestPlace[] =
    "SELECT requested_at_ms FROM dlm_lock_requests "
    "WHERE resource = ?1 AND owner_id = ?2 AND expires_at_ms > ?3";

// ?1 key, ?2 owner: a waiter's request ends with its grant.
inline constexpr char kDeleteOwnRequest[] =
    "DELETE FROM dlm_lock_requests WHERE resource = ?1 AND owner_id = ?2";

// ?1 key: the highest fencing token it issued, or the purge's floor.
inline constexpr char kLastFencingToken[] =
    "SELECT max(l.fencing_token, coalesce((SELECT fencing_token FROM "
    "dlm_fencing_floor WHERE id = 1), 0)) "
    "FROM dlm_locks AS l WHERE l.resource = ?1";

// ?1 key, ?2 owner, ?3 token, ?4 fencing token, ?5 now, ?6 ttl, ?7 expiry,
// ?8 host, ?9 pid.
inline constexpr char kGrantExclusive[] =
    "UPDATE dlm_locks SET status = 'HELD', owner_id = ?2, token = ?3, "
    "fencing_token = ?4, acquired_at_ms = ?5, ttl_ms = ?6, "
    "expires_at_ms = ?7, holder_host = ?8, holder_pid = ?9, "
    "holder_ip = NULL "
    "WHERE resource = ?1";
// ?1 key: every SHARED hold of the key (taken over by an EXCLUSIVE grant).
inline constexpr char kDeleteSharedHolds[] =
    "DELETE FROM dlm_shared_holds WHERE resource = ?1";

// The holds of other keys an attempt passed over because they had expired
// (a live one would have blocked it), taken over like the key's own: ?1 now,
// ?2 the ancestors (JSON array), ?3/?4 the descendant range. EXCLUSIVE
// holds become FREE without their token (their holder's extend finds
// nothing, its release answers false); SHARED holds (in the way of an
// EXCLUSIVE attempt only) are deleted.
inline constexpr char kTakeOverOtherHolds[] =
    "UPDATE dlm_locks SET status = 'FREE', token = NULL, "
    "expires_at_ms = min(expires_at_ms, ?1) "
    "WHERE status = 'HELD' AND resource IN ("
    "SELECT value FROM json_each(?2) UNION ALL "
    "SELECT resource FROM dlm_locks WHERE resource >= ?3 AND resource < ?4)";
inline constexpr char kTakeOverOtherSharedHolds[] =
    "DELETE FROM dlm_shared_holds WHERE resource IN ("
    "SELECT value FROM json_each(?1) UNION ALL "
    "SELECT resource FROM dlm_shared_holds "
    "WHERE resource >= ?2 AND resource < ?3)";

// ?1 key, ?2 fencing token, ?3 now.
inline constexpr char kGrantSharedKeyRow[] =
    "UPDATE dlm_locks SET fencing_token = ?2, "
    "token = CASE WHEN status = 'HELD' THEN NULL ELSE token END, "
    "expires_at_ms = CASE WHEN status = 'HELD' "
    "THEN min(expires_at_ms, ?3) ELSE expires_at_ms END, "
    "status = 'FREE' "
    "WHERE resource = ?1";
// Parameters as kGrantExclusive's.
inline constexpr char kInsertSharedHold[] =
    "INSERT INTO dlm_shared_holds (resource, token, owner_id, "
    "fencing_token, acquired_at_ms, ttl_ms, expires_at_ms, holder_host, "
    "holder_pid, holder_ip) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, NULL)";

// ?1 key, ?2 token, ?3 now: an EXCLUSIVE release; the lease ends now.
inline constexpr char kReleaseExclusive[] =
    "UPDATE dlm_locks SET status = 'FREE', "
    "expires_at_ms = min(expires_at_ms, ?3) "
    "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'";
// ?1 key, ?2 token: whether this token's acquisition was released already.
inline constexpr char kReleasedAlready[] =
    "SELECT 1 FROM dlm_locks WHERE resource = ?1 AND token = ?2";
// ?1 key, ?2 token: a SHARED release.
inline constexpr char kReleaseShared[] =
    "DELETE FROM dlm_shared_holds "
    "WHERE resource = ?1 AND token = ?2";

}  // namespace dlm::internal::sqlite::sql
