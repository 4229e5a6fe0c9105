// PostgresStore: listings, purge and force-release (the LockStoreAdmin
// side) and the server's clock.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/crc32.h"
#include "postgres/owner_digest.h"
#include "postgres/pg_app_transaction.h"
#include "postgres/pg_array.h"
#include "postgres/pg_migrate.h"
#include "postgres/pg_replication.h"
#include "postgres/pg_results.h"
#include "postgres/pg_statements.h"
#include "postgres/pg_store_impl.h"
#include "postgres/schema_locator.h"
#include "schema/schema_compat.h"

namespace dlm {

using internal::fromEpochMs;
using internal::Params;
using internal::PgConn;
using internal::PgResult;
using internal::single;
using internal::toRecord;
using internal::toWaitRecord;

std::optional<LockRecord> PostgresStore::Impl::describe(std::string_view key) {
  const std::string k(key);
  return run("describe", key,
             [&](PgConn& c, Deadline d) -> std::optional<LockRecord> {
               const PgResult r = c.execPrepared(
                   internal::pgStatements().describe, Params{k.c_str()}, d);
               if (r.rows() == 0) return std::nullopt;
               return toRecord(r, 0, /*withMode=*/false);
             });
}

std::vector<LockRecord> PostgresStore::Impl::holds(const char* what, std::string_view key,
                              bool exact) {
  const std::string k(key);
  const auto& statement = exact ? internal::pgStatements().holdersOf
                                : internal::pgStatements().listHeld;
  return run(what, key, [&](PgConn& c, Deadline d) {
    const PgResult r = c.execPrepared(statement, Params{k.c_str()}, d);
    std::vector<LockRecord> records;
    records.reserve(static_cast<std::size_t>(r.rows()));
    for (int row = 0; row < r.rows(); ++row) {
      records.push_back(toRecord(r, row, /*withMode=*/true));
    }
    return records;
  });
}

std::vector<WaitRecord> PostgresStore::Impl::listWaiters(std::string_view keyPrefix) {
  const std::string prefix(keyPrefix);
  return run("listWaiters", keyPrefix, [&](PgConn& c, Deadline d) {
    const PgResult r = c.execPrepared(internal::pgStatements().listWaiters,
                                      Params{prefix.c_str()}, d);
    std::vector<WaitRecord> records;
    records.reserve(static_cast<std::size_t>(r.rows()));
    for (int row = 0; row < r.rows(); ++row) {
      records.push_back(toWaitRecord(r, row));
    }
    return records;
  });
}

PurgeBatch PostgresStore::Impl::purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                     bool dryRun) {
  if (idleFor.count() < 0 || batchSize <= 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgreSQL store: purgeIdle: idleFor must not be "
                       "negative and batchSize must be positive");
  }
  const std::string idle = std::to_string(idleFor.count());
  const std::string batch = std::to_string(batchSize);
  const char* dry = dryRun ? "true" : "false";
  return run("purgeIdle", "", [&](PgConn& c, Deadline d) {
    const PgResult r =
        c.execPrepared(internal::pgStatements().purge,
                       Params{idle.c_str(), batch.c_str(), dry}, d);
    if (r.rows() != 1) {
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         fmt::format("dlm_purge returned {} rows", r.rows()));
    }
    PurgeBatch result;
    result.rows = r.int64(0, 0);
    result.fencingFloor = r.int64(0, 1);
    return result;
  });
}

bool PostgresStore::Impl::forceRelease(std::string_view key) {
  const std::string k(key);
  return run("forceRelease", key, [&](PgConn& c, Deadline d) {
    return single(c.execPrepared(internal::pgStatements().forceRelease,
                                 Params{k.c_str()}, d),
                  "dlm_force_release")
        .boolean(0, 0);
  });
}

StoreTime PostgresStore::Impl::now() {
  return run("now", "", [](PgConn& c, Deadline d) {
    const PgResult r =
        c.execPrepared(internal::pgStatements().now, Params{}, d);
    return fromEpochMs(single(r, "dlm_now"), 0, 0);
  });
}

}  // namespace dlm
