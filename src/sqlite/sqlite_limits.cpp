#include "sqlite/sqlite_limits.h"

#include "sqlite/cycle_sql.h"

namespace dlm::internal::sqlite {

StoreLimits readLimits(Connection& c) {
  Statement row = c.statement(sql::kReadLimits);
  StoreLimits limits;
  if (!row.step()) return limits;
  limits.maxTtlMs = row.integer(0);
  limits.maxKeyBytes = row.integer(1);
  limits.maxKeysPerCall = row.integer(2);
  limits.maxRequestsPerOwner = row.integer(3);
  limits.maxSharedHoldersPerKey = row.integer(4);
  return limits;
}

std::int64_t liveSharedHolds(Connection& c, std::string_view key,
                             std::int64_t now, std::int64_t cap) {
  Statement count = c.statement(sql::kLiveSharedHolds);
  count.bind(1, key).bind(2, now).bind(3, cap);
  if (!count.step()) c.fail(SQLITE_INTERNAL, "counting SHARED holds");
  return count.integer(0);
}

std::int64_t liveRequestsForOtherKeys(Connection& c, std::string_view owner,
                                      std::string_view key, std::int64_t now,
                                      std::int64_t cap) {
  // Through dlm_lock_requests_owner: the owner's rows, stopped at the cap.
  Statement count = c.statement(
      "SELECT count(*) FROM (SELECT 1 FROM dlm_lock_requests "
      "WHERE owner_id = ?1 AND resource <> ?2 AND expires_at_ms > ?3 "
      "LIMIT ?4)");
  count.bind(1, owner).bind(2, key).bind(3, now).bind(4, cap);
  if (!count.step()) c.fail(SQLITE_INTERNAL, "counting the owner's requests");
  return count.integer(0);
}

}  // namespace dlm::internal::sqlite
