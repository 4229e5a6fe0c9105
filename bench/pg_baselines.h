// The raw libpq baselines (a)-(d) of the cycle and contended workloads:
// the same work as the library, without it. (e) is in pg_shedlock.h.
#pragma once

#include <libpq-fe.h>
#include <unistd.h>

#include <random>
#include <stdexcept>
#include <string>

#include "bench_util.h"
#include "crc32.h"
#include "pg_raw.h"

namespace dlm_bench::pg {

// (a) The library's own server functions, called like the library does
// (prepared, autocommit), with the same arguments, but no library code.
class RawFunctions {
 public:
  RawFunctions(const std::string& conninfo, std::uint64_t seed)
      : conn_(conninfo), rng_(seed), owner_(randomHex(rng_, 32)) {
    // The session setting the store makes (pg_session.cpp): generic plans
    // inside the functions, or each call re-plans its statements.
    conn_.exec("SET plan_cache_mode = force_generic_plan");
    conn_.prepare("acq",
                  "SELECT acquired, fencing_token, acquired_at_ms, "
                  "expires_at_ms, blocked_by, queued FROM dlm_try_acquire("
                  "$1::text[], $2::bigint[], $3, $4, $5, $6, $7, $8, $9, "
                  "false)");
    conn_.prepare("rel", "SELECT dlm_release($1, $2, $3::text[], $4, $5)");
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    host_ = host;
    pid_ = std::to_string(getpid());
  }
  // One attempt on a single-segment key with hierarchy on (the descendant
  // range is checked, as the library does). True when acquired.
  bool acquire(const std::string& k, int ttlMs) {
    const std::string keys = "{\"" + k + "\"}";
    const std::string crcs =
        "{" + std::to_string(crc32(k)) + "}";
    const std::string descBegin = k + ".";
    const std::string descEnd = k + "/";
    token_ = randomHex(rng_, 32);
    const std::string ttl = std::to_string(ttlMs);
    PgResult r = conn_.execPrepared(
        "acq", {keys.c_str(), crcs.c_str(), descBegin.c_str(), descEnd.c_str(),
                owner_.c_str(), token_.c_str(), ttl.c_str(), host_.c_str(),
                pid_.c_str()});
    return PQgetvalue(r.get(), 0, 0)[0] == 't';
  }
  void release(const std::string& k) {
    // The same hierarchy arguments as the library passes for a one-segment
    // key: no ancestors, the descendant range (for waking waiters).
    const std::string descBegin = k + ".";
    const std::string descEnd = k + "/";
    PgResult r = conn_.execPrepared(
        "rel",
        {k.c_str(), token_.c_str(), "{}", descBegin.c_str(), descEnd.c_str()});
    if (PQgetvalue(r.get(), 0, 0)[0] != 't') {
      throw std::runtime_error("raw dlm_release returned false for " + k);
    }
  }

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string owner_, token_, host_, pid_;
};

// (b) The clustered-locking row design done client-side: BEGIN; SELECT ...
// FOR UPDATE; UPDATE; COMMIT for the acquire and the same for the release,
// on the same table, every commit durable.
class RawSelectForUpdate {
 public:
  RawSelectForUpdate(const std::string& conninfo, std::uint64_t seed)
      : conn_(conninfo), rng_(seed), owner_(randomHex(rng_, 32)) {
    conn_.prepare("sel",
                  "SELECT status, token, expires_at > clock_timestamp() FROM "
                  "dlm_locks WHERE resource = $1 FOR UPDATE");
    conn_.prepare(
        "take",
        "UPDATE dlm_locks SET status = 'HELD', owner_id = $2, token = $3, "
        "fencing_token = fencing_token + 1, acquired_at = clock_timestamp(), "
        "ttl_ms = $4::bigint, expires_at = clock_timestamp() + $4::bigint * "
        "interval '1 "
        "millisecond' WHERE resource = $1");
    conn_.prepare("free",
                  "UPDATE dlm_locks SET status = 'FREE' WHERE resource = $1 "
                  "AND token = $2");
  }
  bool acquire(const std::string& k, int ttlMs) {
    conn_.exec("BEGIN");
    PgResult row = conn_.execPrepared("sel", {k.c_str()});
    if (PQntuples(row.get()) != 1) {
      conn_.exec("ROLLBACK");
      throw std::runtime_error("baseline b: no row for " + k);
    }
    const bool held = std::string(PQgetvalue(row.get(), 0, 0)) == "HELD" &&
                      PQgetvalue(row.get(), 0, 2)[0] == 't';
    if (held) {
      conn_.exec("ROLLBACK");
      return false;
    }
    token_ = randomHex(rng_, 32);
    const std::string ttl = std::to_string(ttlMs);
    conn_.execPrepared(
        "take", {k.c_str(), owner_.c_str(), token_.c_str(), ttl.c_str()});
    conn_.exec("COMMIT");
    return true;
  }
  void release(const std::string& k) {
    conn_.exec("BEGIN");
    conn_.execPrepared("sel", {k.c_str()});
    conn_.execPrepared("free", {k.c_str(), token_.c_str()});
    conn_.exec("COMMIT");
  }

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string owner_, token_;
};

// (c) The native floor: session advisory locks.
class RawAdvisory {
 public:
  explicit RawAdvisory(const std::string& conninfo) : conn_(conninfo) {
    conn_.prepare("lk", "SELECT pg_try_advisory_lock($1::bigint)");
    conn_.prepare("ul", "SELECT pg_advisory_unlock($1::bigint)");
  }
  bool acquire(std::int64_t k) {
    const std::string s = std::to_string(k);
    PgResult r = conn_.execPrepared("lk", {s.c_str()});
    return PQgetvalue(r.get(), 0, 0)[0] == 't';
  }
  void release(std::int64_t k) {
    const std::string s = std::to_string(k);
    conn_.execPrepared("ul", {s.c_str()});
  }

 private:
  PgConn conn_;
};

// (d) What table-based peers (ShedLock and the like) do: an upsert that
// takes the row only if expired, and an UPDATE by owner to release; two
// autocommit statements, both durable.
class RawUpsert {
 public:
  RawUpsert(const std::string& conninfo, std::uint64_t seed)
      : conn_(conninfo), rng_(seed), owner_(randomHex(rng_, 32)) {
    conn_.prepare(
        "acq",
        "INSERT INTO bench_peer_locks (name, lock_until, locked_at, "
        "locked_by) VALUES ($1, clock_timestamp() + $2::bigint * interval '1 "
        "millisecond', clock_timestamp(), $3) ON CONFLICT (name) DO UPDATE "
        "SET lock_until = EXCLUDED.lock_until, locked_at = "
        "EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by WHERE "
        "bench_peer_locks.lock_until <= clock_timestamp()");
    conn_.prepare("rel",
                  "UPDATE bench_peer_locks SET lock_until = clock_timestamp() "
                  "WHERE name = $1 AND locked_by = $2");
  }
  bool acquire(const std::string& name, int ttlMs) {
    const std::string ttl = std::to_string(ttlMs);
    PgResult r =
        conn_.execPrepared("acq", {name.c_str(), ttl.c_str(), owner_.c_str()});
    return std::string(PQcmdTuples(r.get())) == "1";
  }
  void release(const std::string& name) {
    PgResult r = conn_.execPrepared("rel", {name.c_str(), owner_.c_str()});
    if (std::string(PQcmdTuples(r.get())) != "1") {
      throw std::runtime_error("baseline d: release found no row " + name);
    }
  }

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string owner_;
};

}  // namespace dlm_bench::pg
