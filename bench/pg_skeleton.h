// Baseline (f): the skeleton of dlm's server protocol in PL/pgSQL, and
// nothing else. One SECURITY DEFINER function (pinned search_path, as
// dlm's) row-locks the key's row FOR UPDATE and grants it in a second
// statement (a fresh snapshot after the lock, durable commit); another
// frees it in one UPDATE (lazy commit). No tenancy, limits, hierarchy,
// queue, SHARED holds or fencing floor. It measures the floor that one
// round trip per call, least privilege and the row-lock protocol put under
// any acquire + release written this way.
#pragma once

#include <random>
#include <string>

#include "pg_raw.h"

namespace dlm_bench {

// Creates bench_skeleton_acquire, bench_skeleton_release and
// bench_skeleton_extend ((f)'s extend: one conditional UPDATE, durable) over
// dlm_locks in the bench's database (the connection's current schema).
void createSkeletonFunctions(PgConn& c);

class RawSkeleton {
 public:
  RawSkeleton(const std::string& conninfo, std::uint64_t seed);
  // True when granted (the key's row must exist).
  bool acquire(const std::string& key, int ttlMs);
  // Throws when this token did not hold it.
  void release(const std::string& key);
  // Extends what the last acquire of `key` took; throws when not held.
  void extend(const std::string& key, int ttlMs);
  // Creates `key`'s row when missing.
  void ensureRow(const std::string& key);

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string token_;
};

}  // namespace dlm_bench
