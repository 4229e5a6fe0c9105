// The uncontended cycle with junk present on other keys (100,000 live
// request rows and 100,000 live SHARED holds in one database) against the
// same cycle on a database without it, interleaved in one run: what a
// neighbour's (or a crashed fleet's) leftovers cost everyone else's locks.
#include <dlm/dlm.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "pg_common.h"
#include "pg_raw.h"

namespace dlm_bench::pg {

namespace {

constexpr int kJunkRows = 100000;

// Junk under client "junk": requests for keys r<i> and SHARED holds on keys
// s<i> (with their lock rows), all live for an hour, written straight into
// the tables as the schema owner.
void writeJunk(const std::string& conninfo) {
  PgConn c(conninfo);
  c.exec(fmt::format(
      "INSERT INTO dlm_lock_requests (resource, owner_id, requested_at, "
      "expires_at, mode) SELECT format('DC#{0}#junk#r%s', i), "
      "md5(i::text), now(), now() + interval '1 hour', 'EXCLUSIVE' FROM "
      "generate_series(1, {1}) i",
      kFarm, kJunkRows));
  c.exec(fmt::format(
      "INSERT INTO dlm_locks (resource, resource_crc, fencing_token) SELECT "
      "format('DC#{0}#junk#s%s', i), 0, 1 FROM generate_series(1, {1}) i",
      kFarm, kJunkRows));
  c.exec(fmt::format(
      "INSERT INTO dlm_shared_holds (resource, token, owner_id, "
      "fencing_token, acquired_at, ttl_ms, expires_at) SELECT "
      "format('DC#{0}#junk#s%s', i), md5('t' || i), md5(i::text), 1, now(), "
      "3600000, now() + interval '1 hour' FROM generate_series(1, {1}) i",
      kFarm, kJunkRows));
  c.exec("VACUUM ANALYZE dlm_lock_requests");
  c.exec("VACUUM ANALYZE dlm_shared_holds");
  c.exec("VACUUM ANALYZE dlm_locks");
}

}  // namespace

void runJunk(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  const std::string db = f.dbName + "_junk";
  const std::string junkConninfo = withDatabase(f.pgConnection, db);
  createDatabase(ctx.admin, db);
  createSchema(junkConninfo, f);
  writeJunk(junkConninfo);

  auto clean = makeManager(ctx.conninfo, 1, "lib", cycleConfiguration(f));
  auto junk = makeManager(junkConninfo, 1, "lib", cycleConfiguration(f));
  const std::vector<RunStats> runs =
      interleaved(2, f.rounds, f.seconds, f.warmup,
                  [&](int variant, double seconds, double warmup) {
                    dlm::DistributedLockManager* m =
                        variant == 0 ? clean.get() : junk.get();
                    return timedRun(1, seconds, warmup, [&](int t) {
                      return libraryCycle(m, t, f.keys, 9000);
                    });
                  });
  clean->destroy();
  junk->destroy();

  const double ratio = runs[1].opsPerSec() / runs[0].opsPerSec();
  Result r = fromStats("junk", "threads=1", runs[1]);
  r.ratio = fmt::format("{:.2f}x clean", ratio);
  r.extra = fmt::format(
      "the cycle with {} live requests and {} live SHARED holds on other "
      "keys in its database",
      kJunkRows, kJunkRows);
  r.numbers["ratio_clean"] = ratio;
  ctx.report.add(r);
  Result base = fromStats("junk.base_clean", "threads=1", runs[0]);
  base.extra = "the same cycle on a database without them";
  ctx.report.add(base);
  ctx.admin.exec(
      fmt::format("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", db));
}

}  // namespace dlm_bench::pg
