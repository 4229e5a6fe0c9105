#include "pg_batch_floor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "bench_util.h"
#include "postgres/pg_array.h"

namespace dlm_bench {

void createBatchSkeletonFunctions(PgConn& c) {
  const std::string schema = c.value("SELECT current_schema()");
  // Statement one locks the rows in key order (SKIP LOCKED: a row locked
  // elsewhere leaves the batch); statement two, with a fresh snapshot,
  // grants the locked rows that are free or expired. Durable commit (the
  // session default).
  c.exec(fmt::format(R"(
CREATE FUNCTION bench_batch_acquire(p_keys text[], p_tokens text[],
    p_ttl_ms bigint[])
  RETURNS TABLE(o_ord bigint, o_fence bigint)
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, "{0}", pg_temp
AS $$
DECLARE
  v_locked text[];
BEGIN
  SELECT array_agg(q.resource) INTO v_locked
    FROM (SELECT l.resource FROM dlm_locks l
           WHERE l.resource = ANY (p_keys)
           ORDER BY l.resource
             FOR UPDATE OF l SKIP LOCKED) AS q;
  RETURN QUERY
    UPDATE dlm_locks l
       SET status = 'HELD', owner_id = u.t, token = u.t,
           fencing_token = l.fencing_token + 1,
           acquired_at = clock_timestamp(), ttl_ms = u.ttl,
           expires_at = clock_timestamp() + u.ttl * interval '1 millisecond'
      FROM unnest(p_keys, p_tokens, p_ttl_ms) WITH ORDINALITY
             AS u (k, t, ttl, i)
     WHERE l.resource = u.k AND u.k = ANY (v_locked)
       AND (l.status <> 'HELD' OR l.expires_at <= clock_timestamp())
    RETURNING u.i, l.fencing_token;
END
$$)",
                     schema));
  // One UPDATE frees every key this token holds; lazy commit, as dlm's
  // release (a release lost in a crash only keeps the lock until its TTL).
  c.exec(fmt::format(R"(
CREATE FUNCTION bench_batch_release(p_keys text[], p_tokens text[])
    RETURNS integer
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, "{0}", pg_temp
AS $$
DECLARE
  v_void text;
  v_n    integer;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
    FROM unnest(p_keys, p_tokens) AS u (k, t)
   WHERE l.resource = u.k AND l.token = u.t AND l.status = 'HELD';
  GET DIAGNOSTICS v_n = ROW_COUNT;
  RETURN v_n;
END
$$)",
                     schema));
}

std::string batchTextArray(const std::vector<std::string>& items) {
  // Quoted as the store quotes: its own literal builder.
  return dlm::internal::textArrayLiteral(
      std::vector<std::string_view>(items.begin(), items.end()));
}

namespace {

// n copies of `value` as a bigint[] literal.
std::string floorBigintArray(std::size_t n, std::int64_t value) {
  return dlm::internal::bigintArrayLiteral(std::vector<std::int64_t>(n, value));
}

std::vector<std::string> floorFreshTokens(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (std::size_t i = 0; i < n; ++i) tokens.push_back(randomHex(rng, 32));
  return tokens;
}

}  // namespace

RawBatchSkeleton::RawBatchSkeleton(const std::string& conninfo,
                                   std::uint64_t seed)
    : conn_(conninfo), rng_(seed) {
  conn_.exec("SET plan_cache_mode = force_generic_plan");
  conn_.prepare("g_acq",
                "SELECT o_ord, o_fence FROM bench_batch_acquire($1::text[], "
                "$2::text[], $3::bigint[])");
  conn_.prepare("g_rel", "SELECT bench_batch_release($1::text[], $2::text[])");
}

void RawBatchSkeleton::acquire(const std::vector<std::string>& keys,
                               int ttlMs) {
  n_ = keys.size();
  keys_ = batchTextArray(keys);
  tokens_ = batchTextArray(floorFreshTokens(rng_, n_));
  const std::string ttls = floorBigintArray(n_, ttlMs);
  const PgResult r = conn_.execPrepared(
      "g_acq", {keys_.c_str(), tokens_.c_str(), ttls.c_str()});
  if (static_cast<std::size_t>(PQntuples(r.get())) != n_) {
    throw std::runtime_error(fmt::format("baseline g: {} of {} keys granted",
                                         PQntuples(r.get()), n_));
  }
}

void RawBatchSkeleton::release() {
  const PgResult r =
      conn_.execPrepared("g_rel", {keys_.c_str(), tokens_.c_str()});
  if (std::to_string(n_) != PQgetvalue(r.get(), 0, 0)) {
    throw std::runtime_error(fmt::format("baseline g: {} of {} keys freed",
                                         PQgetvalue(r.get(), 0, 0), n_));
  }
}

RawBatchEach::RawBatchEach(const std::string& conninfo, std::uint64_t seed)
    : conn_(conninfo), rng_(seed), owner_(randomHex(rng_, 32)) {
  // The session setting the store makes (pg_session.cpp).
  conn_.exec("SET plan_cache_mode = force_generic_plan");
  // The store's statements (pg_statements.cpp).
  conn_.prepare(
      "each_acq",
      "SELECT ord, outcome, fencing_token, acquired_at_ms, expires_at_ms "
      "FROM dlm_try_acquire_each($1::text[], $2::text[], $3::text[], "
      "$4::text[], $5::text[], $6::bigint[], $7, $8::bigint)");
  conn_.prepare("each_rel",
                "SELECT ord, outcome FROM dlm_release_each($1::text[], "
                "$2::text[], $3::text[])");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  host_ = host;
  pid_ = std::to_string(getpid());
}

void RawBatchEach::acquire(const std::vector<std::string>& keys, int ttlMs) {
  n_ = keys.size();
  // Hierarchy on, depth one: each key's descendant range, as the library
  // passes it (separator '.').
  std::vector<std::string> begins, ends;
  begins.reserve(n_);
  ends.reserve(n_);
  for (const auto& k : keys) {
    begins.push_back(k + ".");
    ends.push_back(k + "/");
  }
  keys_ = batchTextArray(keys);
  tokens_ = batchTextArray(floorFreshTokens(rng_, n_));
  descEnd_ = batchTextArray(ends);
  const std::string descBegin = batchTextArray(begins);
  const std::string owners =
      batchTextArray(std::vector<std::string>(n_, owner_));
  const std::string ttls = floorBigintArray(n_, ttlMs);
  const PgResult r = conn_.execPrepared(
      "each_acq",
      {keys_.c_str(), descBegin.c_str(), descEnd_.c_str(), owners.c_str(),
       tokens_.c_str(), ttls.c_str(), host_.c_str(), pid_.c_str()});
  const int rows = PQntuples(r.get());
  if (static_cast<std::size_t>(rows) != n_) {
    throw std::runtime_error(
        fmt::format("dlm_try_acquire_each: {} rows for {} keys", rows, n_));
  }
  for (int i = 0; i < rows; ++i) {
    const std::string outcome = PQgetvalue(r.get(), i, 1);
    if (outcome != "acquired") {
      throw std::runtime_error("dlm_try_acquire_each answered " + outcome +
                               " for " + keys[static_cast<std::size_t>(i)]);
    }
  }
}

void RawBatchEach::release() {
  const PgResult r = conn_.execPrepared(
      "each_rel", {keys_.c_str(), tokens_.c_str(), descEnd_.c_str()});
  const int rows = PQntuples(r.get());
  for (int i = 0; i < rows; ++i) {
    const std::string outcome = PQgetvalue(r.get(), i, 1);
    if (outcome != "released") {
      throw std::runtime_error("dlm_release_each answered " + outcome);
    }
  }
  if (static_cast<std::size_t>(rows) != n_) {
    throw std::runtime_error(
        fmt::format("dlm_release_each: {} rows for {} keys", rows, n_));
  }
}

}  // namespace dlm_bench
