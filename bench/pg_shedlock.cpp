#include "pg_shedlock.h"

#include <fmt/format.h>

#include <stdexcept>

#include "bench_util.h"

namespace dlm_bench {

void createShedLockTable(PgConn& c) {
  c.exec(fmt::format(
      "CREATE TABLE {} (name text PRIMARY KEY, lock_until timestamptz NOT "
      "NULL, locked_at timestamptz NOT NULL, locked_by text NOT NULL)",
      kShedLockTable));
}

RawShedLock::RawShedLock(const std::string& conninfo, std::uint64_t seed)
    : conn_(conninfo), rng_(seed), owner_(randomHex(rng_, 32)) {
  conn_.prepare("e_lock",
                fmt::format("UPDATE {} SET lock_until = now() + $3::bigint * "
                            "interval '1 millisecond', locked_at = now(), "
                            "locked_by = $2 WHERE name = $1 AND lock_until <= "
                            "now()",
                            kShedLockTable));
  conn_.prepare("e_unlock",
                fmt::format("UPDATE {} SET lock_until = now() WHERE name = $1 "
                            "AND locked_by = $2",
                            kShedLockTable));
  conn_.prepare("e_extend",
                fmt::format("UPDATE {} SET lock_until = now() + $3::bigint * "
                            "interval '1 millisecond' WHERE name = $1 AND "
                            "locked_by = $2 AND lock_until > now()",
                            kShedLockTable));
}

namespace {
bool oneRow(const PgResult& r) {
  return std::string(PQcmdTuples(r.get())) == "1";
}
}  // namespace

bool RawShedLock::lock(const std::string& name, int ttlMs) {
  const std::string ttl = std::to_string(ttlMs);
  return oneRow(conn_.execPrepared(
      "e_lock", {name.c_str(), owner_.c_str(), ttl.c_str()}));
}

void RawShedLock::unlock(const std::string& name) {
  if (!oneRow(conn_.execPrepared("e_unlock", {name.c_str(), owner_.c_str()}))) {
    throw std::runtime_error("baseline e: unlock found no row held for " +
                             name);
  }
}

bool RawShedLock::extend(const std::string& name, int ttlMs) {
  const std::string ttl = std::to_string(ttlMs);
  return oneRow(conn_.execPrepared(
      "e_extend", {name.c_str(), owner_.c_str(), ttl.c_str()}));
}

}  // namespace dlm_bench
