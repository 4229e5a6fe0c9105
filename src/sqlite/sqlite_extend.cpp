#include "sqlite/sqlite_extend.h"

#include "common/store_limits.h"
#include "sqlite/sqlite_limits.h"
#include "sqlite/store_time.h"

namespace dlm::internal::sqlite {

std::optional<std::int64_t> extendWithin(Connection& c, std::string_view key,
                                         std::string_view token,
                                         std::chrono::milliseconds ttl,
                                         LockMode mode) {
  // The DBA's cap on leases (dlm_limits), as of this transaction.
  checkTtlLimit(readLimits(c), ttl);
  // After BEGIN IMMEDIATE, which may have waited for the write lock.
  const std::int64_t expires = expiryMs(nowMs(), ttl);
  // Only while this acquisition still holds the key (expired but not
  // taken over counts: then the EXCLUSIVE row is still HELD with the
  // token, the SHARED hold's row still there).
  Statement update =
      mode == LockMode::SHARED
          ? c.statement(
                "UPDATE dlm_shared_holds SET ttl_ms = ?3, "
                "expires_at_ms = ?4 WHERE resource = ?1 AND token = ?2")
          : c.statement(
                "UPDATE dlm_locks SET ttl_ms = ?3, expires_at_ms = ?4 "
                "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'");
  update.bind(1, key)
      .bind(2, token)
      .bind(3, static_cast<std::int64_t>(ttl.count()))
      .bind(4, expires)
      .run();
  if (sqlite3_changes(c.handle()) == 0) return std::nullopt;
  return expires;
}

std::optional<std::int64_t> extendIn(Connection& c, std::string_view key,
                                     std::string_view token,
                                     std::chrono::milliseconds ttl,
                                     LockMode mode) {
  Transaction tx(c, Durability::kDurable);
  const auto expires = extendWithin(c, key, token, ttl, mode);
  tx.commit();
  return expires;
}

}  // namespace dlm::internal::sqlite
