// PostgresStore: the lock protocol's single calls (acquire, release,
// extend, waits, release notifications), each one prepared statement in
// autocommit calling a server function, so the call is the whole
// transaction and one round trip.
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

using internal::boundOrNull;
using internal::fromEpochMs;
using internal::Hierarchy;
using internal::kLockNotAvailable;
using internal::Params;
using internal::PgConn;
using internal::PgResult;
using internal::single;
using internal::sqlBoolean;

AcquireResult PostgresStore::Impl::tryAcquire(const AcquireRequest& request) {
  const StoreKey& key = request.key;
  std::vector<std::string_view> path;
  std::vector<std::int64_t> crcs;
  path.reserve(key.ancestors.size() + 1);
  crcs.reserve(key.ancestors.size() + 1);
  for (const auto& a : key.ancestors) {
    path.emplace_back(a);
    crcs.push_back(internal::crc32(a));
  }
  path.emplace_back(key.key);
  crcs.push_back(internal::crc32(key.key));
  const std::string keys = internal::textArrayLiteral(path);
  const std::string crcList = internal::bigintArrayLiteral(crcs);
  const std::string owner(request.owner);
  const std::string token(request.token);
  const std::string ttl = std::to_string(request.ttl.count());
  const std::string pid = std::to_string(request.holder.pid);
  const Params params{keys.c_str(),
                      crcList.c_str(),
                      boundOrNull(key.descendantsBegin),
                      boundOrNull(key.descendantsEnd),
                      owner.c_str(),
                      token.c_str(),
                      ttl.c_str(),
                      request.holder.host.c_str(),
                      pid.c_str(),
                      sqlBoolean(request.mode == LockMode::SHARED)};

  return run("acquire", key.key, [&](PgConn& c, Deadline d) {
    PgResult r;
    try {
      r = c.execPrepared(internal::pgStatements().acquire, params, d);
    } catch (const internal::PgError& e) {
      // Someone else's open transaction holds a row lock we need (a
      // SELECT ... FOR UPDATE, a long migration): the key is busy, which
      // is an answer, not a failure. The function's transaction rolled
      // back, so nothing changed.
      if (e.sqlstate() != kLockNotAvailable) throw;
      AcquireResult busy;
      busy.blockedBy = key.key;
      return busy;
    }
    if (r.rows() != 1) {
      throw DLMException(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("dlm_try_acquire returned {} rows", r.rows()));
    }
    AcquireResult result;
    result.acquired = r.boolean(0, 0);
    if (result.acquired) {
      result.fencingToken = r.int64(0, 1);
      result.acquiredAt = fromEpochMs(r, 0, 2);
      result.expiresAt = fromEpochMs(r, 0, 3);
    } else {
      result.blockedBy = r.text(0, 4);
      result.queued = r.boolean(0, 5);
    }
    return result;
  });
}

bool PostgresStore::Impl::release(const StoreKey& key, std::string_view token, LockMode mode) {
  const Hierarchy h(key);
  const std::string t(token);
  const Params params{key.key.c_str(), t.c_str(), h.ancestors.c_str(),
                      h.descBegin, h.descEnd};
  const bool shared = mode == LockMode::SHARED;
  const auto& statement = shared ? internal::pgStatements().releaseShared
                                 : internal::pgStatements().release;
  return run("release", key.key, [&](PgConn& c, Deadline d) {
    return single(c.execPrepared(statement, params, d),
                  shared ? "dlm_release_shared" : "dlm_release")
        .boolean(0, 0);
  });
}

void PostgresStore::Impl::commitLock(AppTransaction& appTx, const StoreKey& key,
                std::string_view token, LockMode mode) {
  internal::releaseInAppTransaction(appTx, functionSchema(), key, token,
                                    mode);
}

void PostgresStore::Impl::guardWithin(AppTransaction& appTx, const StoreKey& key,
                 std::string_view token, LockMode mode) {
  internal::guardInAppTransaction(appTx, functionSchema(), key, token, mode);
}

WaitRegistration PostgresStore::Impl::registerWait(const WaitRequest& request) {
  const Hierarchy h(request.key);
  const std::string owner(request.owner);
  const std::string maxWait = std::to_string(request.maxWait.count());
  const std::string untilDeadline =
      request.untilDeadline
          ? std::to_string(std::max<std::int64_t>(
                request.untilDeadline->count(), 0))
          : std::string();
  const Params params{request.key.key.c_str(),
                      h.ancestors.c_str(),
                      h.descBegin,
                      h.descEnd,
                      owner.c_str(),
                      maxWait.c_str(),
                      sqlBoolean(request.mode == LockMode::SHARED),
                      request.untilDeadline ? untilDeadline.c_str() : nullptr};
  const auto keysOf = [](const PgResult& r) {
    std::vector<std::string> keys;
    keys.reserve(static_cast<std::size_t>(r.rows()));
    for (int row = 0; row < r.rows(); ++row) keys.push_back(r.text(row, 0));
    return keys;
  };
  WaitRegistration registration;
  registration.deadlockCycle =
      run("registerWait", request.key.key, [&](PgConn& c, Deadline d) {
        return keysOf(
            c.execPrepared(internal::pgStatements().registerWait, params, d));
      });
  if (!registration.deadlockCycle.empty()) return registration;
  // No table lock serialises registrations (a neighbour could hold it
  // open): the graph is walked again in a transaction of its own, after
  // this registration committed, so of two waits that close a cycle at
  // once the later to commit sees the other's row.
  const Params cycleParams{request.key.key.c_str(), owner.c_str()};
  registration.deadlockCycle =
      run("registerWait", request.key.key, [&](PgConn& c, Deadline d) {
        return keysOf(c.execPrepared(internal::pgStatements().waitCycle,
                                     cycleParams, d));
      });
  // A cycle found there leaves nothing recorded: dlm_wait_cycle deleted
  // the request row in the transaction that found it.
  if (registration.deadlockCycle.empty()) expectReleases(request.key.key);
  return registration;
}

void PostgresStore::Impl::expectReleases(const std::string& key) {
  if (!releases_.running() || releases_.hints().knows(key)) return;
  try {
    const Params params{key.c_str()};
    std::vector<std::string> hints =
        run("registerWait", key, [&](PgConn& c, Deadline d) {
          const PgResult r =
              c.execPrepared(internal::pgStatements().releaseHints, params, d);
          std::vector<std::string> out;
          for (int row = 0; row < r.rows(); ++row) {
            out.push_back(r.text(row, 0));
          }
          return out;
        });
    releases_.hints().expect(key, hints);
  } catch (const DLMException&) {
    // Polling (sleepBetweenRetries) finds the release instead.
  }
}

void PostgresStore::Impl::unregisterWait(std::string_view key, std::string_view owner) {
  const std::string k(key), o(owner);
  run("unregisterWait", key, [&](PgConn& c, Deadline d) {
    c.execPrepared(internal::pgStatements().unregisterWait,
                   Params{k.c_str(), o.c_str()}, d);
  });
}

bool PostgresStore::Impl::subscribeReleases(ReleaseListener* listener) {
  // Through a transaction pooler with no direct URL: nobody listens, and
  // waiters poll.
  if (options_.poolerSafe && options_.listenConnection.empty()) {
    return false;
  }
  std::string whyNot;
  if (releases_.subscribe(listener, &whyNot)) return true;
  // Waiters still get the lock, by polling: slower, and worth telling
  // (a misspelt dlm_listen_host, a LISTEN the server refuses).
  if (!whyNot.empty()) {
    warnings_.warn(fmt::format(
        "release notifications are off: the LISTEN connection{} could not "
        "be opened ({}); waiting acquires poll every sleepBetweenRetries",
        options_.listenConnection.empty()
            ? ""
            : " (listenConnection, dlm_listen_host/dlm_listen_port)",
        whyNot));
  }
  return false;
}

void PostgresStore::Impl::unsubscribeReleases(ReleaseListener* listener) {
  releases_.unsubscribe(listener);
}

std::optional<StoreTime> PostgresStore::Impl::extend(std::string_view key, std::string_view token,
                                std::chrono::milliseconds ttl,
                                LockMode mode) {
  const std::string k(key), t(token), ttlMs = std::to_string(ttl.count());
  const auto& statement = mode == LockMode::SHARED
                              ? internal::pgStatements().extendShared
                              : internal::pgStatements().extend;
  return run("extend", key,
             [&](PgConn& c, Deadline d) -> std::optional<StoreTime> {
               const PgResult r = c.execPrepared(
                   statement, Params{k.c_str(), t.c_str(), ttlMs.c_str()}, d);
               single(r, "dlm_extend");
               // NULL: the token no longer holds the row.
               if (r.isNull(0, 0)) return std::nullopt;
               return fromEpochMs(r, 0, 0);
             });
}

}  // namespace dlm
