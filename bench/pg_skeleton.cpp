#include "pg_skeleton.h"

#include <fmt/format.h>

#include <stdexcept>

#include "bench_util.h"

namespace dlm_bench {

void createSkeletonFunctions(PgConn& c) {
  const std::string schema = c.value("SELECT current_schema()");
  c.exec(fmt::format(R"(
CREATE FUNCTION bench_skeleton_acquire(p_key text, p_token text,
    p_ttl_ms bigint) RETURNS bigint
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, "{0}", pg_temp
AS $$
DECLARE
  v_status text;
  v_fence  bigint;
BEGIN
  SELECT l.status INTO v_status FROM dlm_locks l
   WHERE l.resource = p_key FOR UPDATE OF l;
  UPDATE dlm_locks l
     SET status = 'HELD', owner_id = p_token, token = p_token,
         fencing_token = l.fencing_token + 1,
         acquired_at = clock_timestamp(), ttl_ms = p_ttl_ms,
         expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond'
   WHERE l.resource = p_key
     AND (l.status <> 'HELD' OR l.expires_at <= clock_timestamp())
  RETURNING l.fencing_token INTO v_fence;
  RETURN v_fence;
END
$$)",
                     schema));
  c.exec(fmt::format(R"(
CREATE FUNCTION bench_skeleton_release(p_key text, p_token text)
    RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, "{0}", pg_temp
AS $$
DECLARE
  v_void text;
BEGIN
  v_void := set_config('synchronous_commit', 'off', true);
  UPDATE dlm_locks l
     SET status = 'FREE', expires_at = least(l.expires_at, clock_timestamp())
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD';
  RETURN FOUND;
END
$$)",
                     schema));
  // (f)'s extend: one conditional UPDATE; durable commit (an extension lost
  // in a crash would let the lock expire while its holder counts on it).
  c.exec(fmt::format(R"(
CREATE FUNCTION bench_skeleton_extend(p_key text, p_token text,
    p_ttl_ms bigint) RETURNS boolean
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, "{0}", pg_temp
AS $$
BEGIN
  UPDATE dlm_locks l
     SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond',
         ttl_ms = p_ttl_ms
   WHERE l.resource = p_key AND l.token = p_token AND l.status = 'HELD'
     AND l.expires_at > clock_timestamp();
  RETURN FOUND;
END
$$)",
                     schema));
}

RawSkeleton::RawSkeleton(const std::string& conninfo, std::uint64_t seed)
    : conn_(conninfo), rng_(seed) {
  conn_.exec("SET plan_cache_mode = force_generic_plan");
  conn_.prepare("f_acq", "SELECT bench_skeleton_acquire($1, $2, $3)");
  conn_.prepare("f_rel", "SELECT bench_skeleton_release($1, $2)");
  conn_.prepare("f_ext", "SELECT bench_skeleton_extend($1, $2, $3)");
  conn_.prepare("f_row",
                "INSERT INTO dlm_locks (resource, resource_crc) VALUES ($1, 0) "
                "ON CONFLICT DO NOTHING");
}

void RawSkeleton::ensureRow(const std::string& key) {
  conn_.execPrepared("f_row", {key.c_str()});
}

void RawSkeleton::extend(const std::string& key, int ttlMs) {
  const std::string ttl = std::to_string(ttlMs);
  const PgResult r = conn_.execPrepared(
      "f_ext", {key.c_str(), token_.c_str(), ttl.c_str()});
  if (PQgetvalue(r.get(), 0, 0)[0] != 't') {
    throw std::runtime_error("baseline f: extend found no hold of " + key);
  }
}

bool RawSkeleton::acquire(const std::string& key, int ttlMs) {
  token_ = randomHex(rng_, 32);
  const std::string ttl = std::to_string(ttlMs);
  const PgResult r = conn_.execPrepared(
      "f_acq", {key.c_str(), token_.c_str(), ttl.c_str()});
  return PQgetisnull(r.get(), 0, 0) == 0;
}

void RawSkeleton::release(const std::string& key) {
  const PgResult r =
      conn_.execPrepared("f_rel", {key.c_str(), token_.c_str()});
  if (PQgetvalue(r.get(), 0, 0)[0] != 't') {
    throw std::runtime_error("baseline f: release found no hold of " + key);
  }
}

}  // namespace dlm_bench
