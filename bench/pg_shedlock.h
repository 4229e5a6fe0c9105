// Baseline (e): the steady-state statements of SQL lock libraries (ShedLock's
// JDBC provider, usingDbTime) through raw libpq: prepared, autocommit, each
// statement its own durable transaction, on a table whose rows exist.
#pragma once

#include <random>
#include <string>

#include "pg_raw.h"

namespace dlm_bench {

// The table of baseline (e).
constexpr const char* kShedLockTable = "bench_shedlock";

// CREATE TABLE of kShedLockTable (in the bench's database, which the bench
// creates and drops).
void createShedLockTable(PgConn& c);

class RawShedLock {
 public:
  // One owner (locked_by) per instance.
  RawShedLock(const std::string& conninfo, std::uint64_t seed);
  // UPDATE ... WHERE name = $1 AND lock_until <= now(): true iff one row
  // was updated (the row must exist).
  bool lock(const std::string& name, int ttlMs);
  // UPDATE ... SET lock_until = now() WHERE name = $1 AND locked_by = $2;
  // throws when no row was updated (this owner did not hold it).
  void unlock(const std::string& name);
  // UPDATE ... SET lock_until = now() + ttl WHERE name = $1 AND locked_by =
  // $2 AND lock_until > now(): true iff one row was updated.
  bool extend(const std::string& name, int ttlMs);

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string owner_;
};

}  // namespace dlm_bench
