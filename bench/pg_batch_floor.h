// Baseline (g): the skeleton of the batched protocol (schema 19) in
// PL/pgSQL, and nothing else, the way (f) is the skeleton of one call per
// lock. Two SECURITY DEFINER functions (pinned search_path, as dlm's):
//   bench_batch_acquire(keys[], tokens[], ttls[]): ONE statement row-locks
//     the keys' rows in key order, skipping rows locked elsewhere
//     (SELECT .. WHERE resource = ANY($1) ORDER BY resource FOR UPDATE SKIP
//     LOCKED), then ONE UPDATE .. FROM unnest(..) (a fresh snapshot after
//     the locks) grants those free or expired; durable commit;
//   bench_batch_release(keys[], tokens[]): ONE UPDATE .. FROM unnest(..)
//     frees the keys this token holds; lazy commit (synchronous_commit off
//     in its transaction).
// No tenancy, limits, hierarchy, queue, SHARED holds, fencing floor, request
// rows, wake-ups or per-key answers beyond the grant. It is the floor that
// set-based statements, least privilege, the row-lock protocol and a durable
// acquire + lazy release put under any batched acquire + release.
//
// RawBatchEach calls dlm's own set-based functions (dlm_try_acquire_each,
// dlm_release_each) the same way: raw libpq, prepared, autocommit, generic
// plans, the statements and arguments of src/postgres/pg_statements.cpp and
// pg_batch_calls.cpp, so the two compare like with like.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pg_raw.h"

namespace dlm_bench {

// Creates bench_batch_acquire and bench_batch_release over dlm_locks in the
// bench's database (the connection's current schema).
void createBatchSkeletonFunctions(PgConn& c);

// One call's keys as a quoted text[] literal, and the same for a value
// repeated per key.
std::string batchTextArray(const std::vector<std::string>& items);

class RawBatchSkeleton {
 public:
  RawBatchSkeleton(const std::string& conninfo, std::uint64_t seed);
  // Acquires every key of `keys` (their rows must exist and be free);
  // throws when one was not granted.
  void acquire(const std::vector<std::string>& keys, int ttlMs);
  // Releases what the last acquire took; throws when one was not freed.
  void release();

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string keys_, tokens_;
  std::size_t n_ = 0;
};

class RawBatchEach {
 public:
  RawBatchEach(const std::string& conninfo, std::uint64_t seed);
  // dlm_try_acquire_each on keys of depth one with hierarchy on (their
  // rows must exist, their client bound); throws unless every key answers
  // 'acquired'.
  void acquire(const std::vector<std::string>& keys, int ttlMs);
  // dlm_release_each of what the last acquire took; throws unless every
  // key answers 'released'.
  void release();

 private:
  PgConn conn_;
  std::mt19937_64 rng_;
  std::string owner_, host_, pid_;
  std::string keys_, tokens_, descEnd_;
  std::size_t n_ = 0;
};

}  // namespace dlm_bench
