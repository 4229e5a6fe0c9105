// PostgreSQL workloads: the library through its public API, and the raw
// libpq baselines of the same work, in one process and one run.
#include <dlm/postgres_store.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <thread>

#include "crc32.h"
#include "pg_raw.h"
#include "pg_server_time.h"
#include "pg_shedlock.h"
#include "workloads.h"

namespace dlm_bench {
namespace {

using std::chrono::milliseconds;

constexpr const char* kFarm = "bench";

struct Ctx {
  const Flags& flags;
  Report& report;
  std::string conninfo;    // the bench database
  std::string rtConninfo;  // the round-trip database (nothing else uses it)
  std::string rtDb;
  PgConn& admin;  // outside the bench database (statistics)
};

dlm::LockConfiguration cycleConfiguration(const Flags& flags) {
  dlm::LockConfiguration c;
  c.lockTtl = milliseconds(flags.ttlMs);
  return c;
}

std::unique_ptr<dlm::DistributedLockManager> makeManager(
    const std::string& conninfo, std::size_t pool, const std::string& client,
    const dlm::LockConfiguration& config, bool migrate = false,
    const std::string& schema = "") {
  dlm::PostgresStoreOptions o;
  o.connection = conninfo;
  o.poolSize = pool;
  o.schema = schema;
  auto store = std::make_shared<dlm::PostgresStore>(o);
  auto m = dlm::DistributedLockManager::builder()
               .clientId(client)
               .farmId(kFarm)
               .store(store)
               .configuration(config)
               .applyMigrations(migrate)
               .build();
  m->initialize();
  return m;
}

std::string key(const std::string& client, const std::string& id) {
  return fmt::format("DC#{}#{}#{}", kFarm, client, id);
}

std::string cycleId(int t, int i) { return fmt::format("c{}k{}", t, i); }

Result fromStats(const std::string& workload, const std::string& config,
                 const RunStats& s) {
  return resultOf(workload, "postgres", config, s, "client_cpu_us_per_op");
}

// --- raw baselines -----------------------------------------------------------

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
        "{" + std::to_string(dlm::internal::crc32(k)) + "}";
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

// --- setup -------------------------------------------------------------------

void createDatabase(PgConn& admin, const std::string& db) {
  admin.exec(fmt::format("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", db));
  admin.exec(fmt::format("CREATE DATABASE \"{}\"", db));
}

// The dlm schema (through the library's migration opt-in) and the peer
// tables of baselines d and e.
void createSchema(const std::string& conninfo, const Flags& f) {
  makeManager(conninfo, 1, "setup", dlm::LockConfiguration{}, true)->destroy();
  PgConn c(conninfo);
  if (!f.pgAfterSchema.empty()) c.exec(f.pgAfterSchema);
  c.exec(
      "CREATE TABLE bench_peer_locks (name text PRIMARY KEY, lock_until "
      "timestamptz NOT NULL, locked_at timestamptz NOT NULL, locked_by text "
      "NOT NULL)");
  createShedLockTable(c);
  c.exec(fmt::format(
      "INSERT INTO {} SELECT n, now() - interval '1 hour', now() - interval "
      "'1 hour', 'nobody' FROM unnest(ARRAY['contended', 'extend']) n",
      kShedLockTable));
}

// --- cycle -------------------------------------------------------------------

void prefillCycleRows(const Ctx& ctx, int maxThreads) {
  PgConn c(ctx.conninfo);
  const int keys = ctx.flags.keys;
  // Every variant finds its rows existing (an UPDATE, not an INSERT), as in
  // a table that has been in use.
  c.exec(fmt::format(
      "INSERT INTO dlm_locks (resource, resource_crc) SELECT "
      "format('DC#{}#%s#c%sk%s', v, t, i), 0 FROM unnest(ARRAY['lib', "
      "'rawa', 'rawb']) v, generate_series(0, {}) t, generate_series(0, {}) "
      "i ON CONFLICT DO NOTHING",
      kFarm, maxThreads - 1, keys - 1));
  c.exec(fmt::format(
      "INSERT INTO bench_peer_locks SELECT format('c%sk%s', t, i), now() - "
      "interval '1 hour', now() - interval '1 hour', 'nobody' FROM "
      "generate_series(0, {}) t, generate_series(0, {}) i ON CONFLICT DO "
      "NOTHING",
      maxThreads - 1, keys - 1));
  // Baseline e: the steady state, every row exists (and is free).
  c.exec(fmt::format(
      "INSERT INTO {} SELECT format('c%sk%s', t, i), now() - interval '1 "
      "hour', now() - interval '1 hour', 'nobody' FROM generate_series(0, "
      "{}) t, generate_series(0, {}) i ON CONFLICT DO NOTHING",
      kShedLockTable, maxThreads - 1, keys - 1));
  c.exec("VACUUM ANALYZE dlm_locks");
  c.exec("VACUUM ANALYZE bench_peer_locks");
  c.exec(fmt::format("VACUUM ANALYZE {}", kShedLockTable));
  c.exec("CHECKPOINT");
}

constexpr const char* kShedLockCycleNote =
    "raw libpq (ShedLock's statements): UPDATE .. WHERE name = $1 AND "
    "lock_until <= now(); UPDATE .. SET lock_until = now() WHERE name = $1 "
    "AND locked_by = $2; prepared, autocommit, rows exist";
constexpr const char* kShedLockExtendNote =
    "raw libpq (ShedLock's statement): UPDATE .. SET lock_until = now() + ttl "
    "WHERE name = $1 AND locked_by = $2 AND lock_until > now(); prepared, "
    "autocommit";

// The cycle's variants: 0 the library (through m), 1-5 baselines a-e, each
// on its own keys of thread t, connected through `conninfo`.
constexpr int kCycleVariants = 6;
const char* const kCycleVariantNames[kCycleVariants] = {
    "dlm", "base_a", "base_b", "base_c", "base_d", "base_e"};

Operation cycleWorker(const Ctx& ctx, int variant, int t,
                      const std::string& conninfo,
                      dlm::DistributedLockManager* m) {
  const int ttl = ctx.flags.ttlMs;
  const int keys = ctx.flags.keys;
  switch (variant) {
    case 0: {  // the library
      std::mt19937_64 rng(1000 + t);
      return [m, t, keys, rng]() mutable {
        dlm::Lock lock = m->getLockInstance(
            cycleId(t, static_cast<int>(rng() % keys)), dlm::LockLevel::DC);
        m->tryAcquireLock(lock);
        if (!m->releaseLock(lock)) {
          throw std::runtime_error("releaseLock returned false");
        }
        return 0;
      };
    }
    case 1: {
      auto raw = std::make_shared<RawFunctions>(conninfo, 2000 + t);
      std::mt19937_64 rng(3000 + t);
      return [raw, t, keys, ttl, rng]() mutable {
        const std::string k =
            key("rawa", cycleId(t, static_cast<int>(rng() % keys)));
        if (!raw->acquire(k, ttl)) throw std::runtime_error("a: refused");
        raw->release(k);
        return 0;
      };
    }
    case 2: {
      auto raw = std::make_shared<RawSelectForUpdate>(conninfo, 4000 + t);
      std::mt19937_64 rng(5000 + t);
      return [raw, t, keys, ttl, rng]() mutable {
        const std::string k =
            key("rawb", cycleId(t, static_cast<int>(rng() % keys)));
        if (!raw->acquire(k, ttl)) throw std::runtime_error("b: refused");
        raw->release(k);
        return 0;
      };
    }
    case 3: {
      auto raw = std::make_shared<RawAdvisory>(conninfo);
      std::mt19937_64 rng(6000 + t);
      return [raw, t, keys, rng]() mutable {
        const std::int64_t k = static_cast<std::int64_t>(t) * keys +
                               static_cast<std::int64_t>(rng() % keys);
        if (!raw->acquire(k)) throw std::runtime_error("c: refused");
        raw->release(k);
        return 0;
      };
    }
    case 4: {
      auto raw = std::make_shared<RawUpsert>(conninfo, 7000 + t);
      std::mt19937_64 rng(8000 + t);
      return [raw, t, keys, ttl, rng]() mutable {
        const std::string k = cycleId(t, static_cast<int>(rng() % keys));
        if (!raw->acquire(k, ttl)) throw std::runtime_error("d: refused");
        raw->release(k);
        return 0;
      };
    }
    default: {
      auto raw = std::make_shared<RawShedLock>(conninfo, 8500 + t);
      std::mt19937_64 rng(8700 + t);
      return [raw, t, keys, ttl, rng]() mutable {
        const std::string k = cycleId(t, static_cast<int>(rng() % keys));
        if (!raw->lock(k, ttl)) throw std::runtime_error("e: refused");
        raw->unlock(k);
        return 0;
      };
    }
  }
}

// Server time and WAL per cycle of every variant, one thread, fresh
// sessions (pg_stat_statements.track = 'all' where allowed), one variant
// at a time; extra lines "<workload>.server" in the report.
void serverSlices(
    const Ctx& ctx, const std::string& workload, const std::string& what,
    int variants, const char* const* names,
    const std::function<Operation(int variant, const std::string& conninfo,
                                  dlm::DistributedLockManager*)>& makeOp) {
  const Flags& f = ctx.flags;
  ServerProbe probe(ctx.admin, ctx.flags.dbName, ctx.conninfo);
  const int ops = std::max(200, static_cast<int>(f.seconds * 250));
  for (int v = 0; v < variants; ++v) {
    const ServerCost cost = probe.perOp(ops, [&](int n) {
      std::unique_ptr<dlm::DistributedLockManager> manager;
      if (v == 0) {
        manager = makeManager(probe.sessionConninfo(), 1, "lib",
                              cycleConfiguration(f));
      }
      {
        Operation op = makeOp(v, probe.sessionConninfo(), manager.get());
        for (int i = 0; i < n; ++i) op();
      }
      if (manager) manager->destroy();
    });
    Result r;
    r.workload = workload + ".server";
    r.store = "postgres";
    r.config = fmt::format("{} threads=1", names[v]);
    r.ratio = ServerProbe::summary(cost);
    r.extra = what + "; " + ServerProbe::breakdown(cost);
    ServerProbe::addNumbers(cost, r);
    ctx.report.add(r);
  }
}

void runCycle(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  int maxThreads = 1;
  for (int t : f.threads) maxThreads = std::max(maxThreads, t);
  prefillCycleRows(ctx, maxThreads);

  for (int threads : f.threads) {
    const std::string config = fmt::format("threads={}", threads);
    auto manager =
        makeManager(ctx.conninfo, threads, "lib", cycleConfiguration(f));
    auto worker = [&](int variant, int t) -> Operation {
      return cycleWorker(ctx, variant, t, ctx.conninfo, manager.get());
    };
    const std::vector<RunStats> runs = interleaved(
        kCycleVariants, f.rounds, f.seconds, f.warmup,
        [&](int variant, double seconds, double warmup) {
          return timedRun(threads, seconds, warmup,
                          [&](int t) { return worker(variant, t); });
        });
    manager->destroy();
    manager.reset();
    const RunStats &lib = runs[0], &a = runs[1], &b = runs[2], &c = runs[3],
                   &d = runs[4], &e = runs[5];

    const double ra = lib.opsPerSec() / a.opsPerSec();
    const double rb = lib.opsPerSec() / b.opsPerSec();
    const double rc = lib.opsPerSec() / c.opsPerSec();
    const double rd = lib.opsPerSec() / d.opsPerSec();
    const double re = lib.opsPerSec() / e.opsPerSec();
    Result r = fromStats("cycle", config, lib);
    r.ratio =
        fmt::format("{:.2f}x a, {:.2f}x b, {:.2f}x c, {:.2f}x d, {:.2f}x e", ra,
                    rb, rc, rd, re);
    r.extra = fmt::format(
        "tryAcquireLock+releaseLock, DC key, depth 1, hierarchy on; client "
        "CPU {:.0f} us/cycle (a: {:.0f})",
        lib.cpuUsPerOp(), a.cpuUsPerOp());
    r.numbers["ratio_a"] = ra;
    r.numbers["ratio_b"] = rb;
    r.numbers["ratio_c"] = rc;
    r.numbers["ratio_d"] = rd;
    r.numbers["ratio_e"] = re;
    ctx.report.add(r);
    Result ra_ = fromStats("cycle.base_a", config, a);
    ra_.extra =
        "raw libpq: dlm_try_acquire + dlm_release, prepared, autocommit";
    ctx.report.add(ra_);
    Result rb_ = fromStats("cycle.base_b", config, b);
    rb_.extra =
        "raw libpq: BEGIN; SELECT FOR UPDATE; UPDATE; COMMIT (x2: acquire, "
        "release)";
    ctx.report.add(rb_);
    Result rc_ = fromStats("cycle.base_c", config, c);
    rc_.extra = "raw libpq: pg_try_advisory_lock + pg_advisory_unlock";
    ctx.report.add(rc_);
    Result rd_ = fromStats("cycle.base_d", config, d);
    rd_.extra =
        "raw libpq: INSERT .. ON CONFLICT DO UPDATE .. WHERE expired; "
        "UPDATE by owner";
    ctx.report.add(rd_);
    Result re_ = fromStats("cycle.base_e", config, e);
    re_.extra = kShedLockCycleNote;
    ctx.report.add(re_);

    if (threads == 1 || threads == 4) {
      ctx.report.addTarget(
          fmt::format("cycle {}: >= 0.9x baseline a: {:.2f}x ({:.0f} vs {:.0f} "
                      "ops/s)",
                      config, ra, lib.opsPerSec(), a.opsPerSec()),
          ra >= 0.9);
      ctx.report.addTarget(
          fmt::format("cycle {}: >= 2x baseline b: {:.2f}x ({:.0f} vs {:.0f} "
                      "ops/s)",
                      config, rb, lib.opsPerSec(), b.opsPerSec()),
          rb >= 2.0);
      ctx.report.addTarget(
          fmt::format("cycle {}: >= 1.3x baseline d: {:.2f}x ({:.0f} vs {:.0f} "
                      "ops/s)",
                      config, rd, lib.opsPerSec(), d.opsPerSec()),
          rd >= 1.3);
    }
  }
  serverSlices(
      ctx, "cycle", "per cycle (acquire + release)", kCycleVariants,
      kCycleVariantNames,
      [&](int v, const std::string& conninfo, dlm::DistributedLockManager* m) {
        return cycleWorker(ctx, v, 0, conninfo, m);
      });
  // The same cycle on ids 8 segments deep (7 ancestors locked FOR SHARE,
  // checked for holds, shared holds and requests).
  const char* const depthName[1] = {"dlm depth=8"};
  serverSlices(
      ctx, "cycle.depth8", "per cycle (acquire + release), id depth 8", 1,
      depthName, [&](int, const std::string&, dlm::DistributedLockManager* m) {
        int i = 0;
        return [m, i]() mutable -> int {
          dlm::Lock lock = m->getLockInstance(
              fmt::format("d8.a.b.c.d.e.f.k{}", i++ % 16), dlm::LockLevel::DC);
          m->tryAcquireLock(lock);
          if (!m->releaseLock(lock)) {
            throw std::runtime_error("releaseLock returned false");
          }
          return 0;
        };
      });
}

// --- extend ------------------------------------------------------------------

// extendLock on a held lock against baseline e's extend statement on a held
// row, one thread each.
// A lock held for the life of an extend worker (released, errors ignored,
// when the worker's operation goes away at the end of its run).
struct HeldByLibrary {
  dlm::DistributedLockManager* m;
  dlm::Lock lock;
  HeldByLibrary(dlm::DistributedLockManager* manager, const std::string& id)
      : m(manager), lock(m->getLockInstance(id, dlm::LockLevel::DC)) {
    m->tryAcquireLock(lock);
  }
  HeldByLibrary(const HeldByLibrary&) = delete;
  HeldByLibrary& operator=(const HeldByLibrary&) = delete;
  ~HeldByLibrary() {
    try {
      m->releaseLock(lock);
    } catch (const std::exception&) {
    }
  }
};

struct HeldByShedLock {
  RawShedLock raw;
  std::string name;
  HeldByShedLock(const std::string& conninfo, const std::string& n, int ttl)
      : raw(conninfo, 9500), name(n) {
    if (!raw.lock(name, ttl)) throw std::runtime_error("e: row held: " + n);
  }
  HeldByShedLock(const HeldByShedLock&) = delete;
  HeldByShedLock& operator=(const HeldByShedLock&) = delete;
  ~HeldByShedLock() {
    try {
      raw.unlock(name);
    } catch (const std::exception&) {
    }
  }
};

Operation extendWorker(const Ctx& ctx, int variant, const std::string& conninfo,
                       dlm::DistributedLockManager* m) {
  const int ttl = ctx.flags.ttlMs;
  if (variant == 0) {
    auto held = std::make_shared<HeldByLibrary>(m, "extend");
    return [held]() {
      held->m->extendLock(held->lock);
      return 0;
    };
  }
  auto held = std::make_shared<HeldByShedLock>(conninfo, "extend", ttl);
  return [held, ttl]() {
    if (!held->raw.extend(held->name, ttl)) {
      throw std::runtime_error("e: not extended");
    }
    return 0;
  };
}

void runExtend(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  const std::string config = "threads=1 held lock";
  auto manager = makeManager(ctx.conninfo, 1, "lib", cycleConfiguration(f));
  const std::vector<RunStats> runs = interleaved(
      2, f.rounds, f.seconds, f.warmup,
      [&](int variant, double seconds, double warmup) {
        return timedRun(1, seconds, warmup, [&](int) {
          return extendWorker(ctx, variant, ctx.conninfo, manager.get());
        });
      });
  manager->destroy();
  manager.reset();
  const RunStats &lib = runs[0], &e = runs[1];
  const double re = lib.opsPerSec() / e.opsPerSec();
  Result r = fromStats("extend", config, lib);
  r.ratio = fmt::format("{:.2f}x e", re);
  r.extra = fmt::format(
      "extendLock on a held DC lock, depth 1; client CPU {:.0f} us/extend "
      "(e: {:.0f})",
      lib.cpuUsPerOp(), e.cpuUsPerOp());
  r.numbers["ratio_e"] = re;
  ctx.report.add(r);
  Result b = fromStats("extend.base_e", config, e);
  b.extra = kShedLockExtendNote;
  ctx.report.add(b);
  static const char* const names[] = {"dlm", "base_e"};
  serverSlices(
      ctx, "extend", "per extend", 2, names,
      [&](int v, const std::string& conninfo, dlm::DistributedLockManager* m) {
        return extendWorker(ctx, v, conninfo, m);
      });
}

// --- round trips -------------------------------------------------------------

struct ServerCounts {
  double transactions = 0;  // xact_commit + xact_rollback
  double statements = -1;   // pg_stat_statements calls; < 0: unavailable
};

class RoundTrips {
 public:
  RoundTrips(const Ctx& ctx, PgConn& admin) : ctx_(ctx), admin_(admin) {
    // pg_stat_statements only works when preloaded; scripts/bench.sh starts
    // the cluster with shared_preload_libraries = pg_stat_statements.
    const std::string preload = admin_.value("SHOW shared_preload_libraries");
    if (preload.find("pg_stat_statements") != std::string::npos) {
      admin_.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
      statements_ = true;
    }
    oid_ = admin_.value(fmt::format(
        "SELECT oid FROM pg_database WHERE datname = '{}'", ctx_.rtDb));
  }

  bool statementsAvailable() const { return statements_; }

  // Counts once every client backend of the round-trip database has exited
  // (a backend flushes its statistics at exit at the latest).
  ServerCounts read() {
    for (int i = 0; i < 1000; ++i) {
      const std::string n = admin_.value(fmt::format(
          "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND "
          "backend_type = 'client backend'",
          ctx_.rtDb));
      if (n == "0") break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ServerCounts c;
    c.transactions = std::stod(admin_.value(fmt::format(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE "
        "datname = '{}'",
        ctx_.rtDb)));
    if (statements_) {
      c.statements = std::stod(admin_.value(fmt::format(
          "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid "
          "= {}",
          oid_)));
    }
    return c;
  }

  // Server-side counts of `fn` (which opens and closes its own
  // connections).
  ServerCounts measure(const std::function<void()>& fn) {
    const ServerCounts before = read();
    fn();
    const ServerCounts after = read();
    ServerCounts d;
    d.transactions = after.transactions - before.transactions;
    d.statements = statements_ ? after.statements - before.statements : -1;
    return d;
  }

  // Per-operation counts: (counts(n2) - counts(n1)) / (n2 - n1), which
  // cancels what a session costs once (connect, initialize, PREPAREs).
  ServerCounts perOp(const std::function<void(int n, int phase)>& session) {
    const int n1 = 100, n2 = 400;
    const ServerCounts c1 = measure([&] { session(n1, phase_++); });
    const ServerCounts c2 = measure([&] { session(n2, phase_++); });
    ServerCounts r;
    r.transactions = (c2.transactions - c1.transactions) / (n2 - n1);
    r.statements =
        statements_ ? (c2.statements - c1.statements) / (n2 - n1) : -1;
    return r;
  }

 private:
  const Ctx& ctx_;
  PgConn& admin_;
  bool statements_ = false;
  std::string oid_;
  int phase_ = 0;
};

void runRoundTrips(const Ctx& ctx, PgConn& admin) {
  createDatabase(admin, ctx.rtDb);
  createSchema(ctx.rtConninfo, ctx.flags);
  {
    // Nothing but the measured sessions may run transactions here.
    PgConn c(ctx.rtConninfo);
    c.exec("ALTER TABLE dlm_locks SET (autovacuum_enabled = false)");
    c.exec("ALTER TABLE dlm_lock_requests SET (autovacuum_enabled = false)");
    c.exec(
        "INSERT INTO dlm_locks (resource, resource_crc) SELECT "
        "format('DC#bench#rawb#rt%sk%s', p, i), 0 FROM generate_series(0, 9) "
        "p, generate_series(0, 399) i");
  }
  RoundTrips rt(ctx, admin);
  const int ttl = ctx.flags.ttlMs;

  auto library = [&](bool release) {
    return [&, release](int n, int phase) {
      auto m = makeManager(ctx.rtConninfo, 1, fmt::format("rt{}", phase),
                           cycleConfiguration(ctx.flags));
      for (int i = 0; i < n; ++i) {
        dlm::Lock lock =
            m->getLockInstance(fmt::format("k{}", i), dlm::LockLevel::DC);
        m->tryAcquireLock(lock);
        if (release) m->releaseLock(lock);
      }
      m->destroy();
    };
  };
  auto rawB = [&](bool release) {
    return [&, release](int n, int phase) {
      RawSelectForUpdate raw(ctx.rtConninfo, 99 + phase);
      for (int i = 0; i < n; ++i) {
        const std::string k = fmt::format("DC#bench#rawb#rt{}k{}", phase, i);
        raw.acquire(k, ttl);
        if (release) raw.release(k);
      }
    };
  };

  const ServerCounts libAcquire = rt.perOp(library(false));
  const ServerCounts libCycle = rt.perOp(library(true));
  const ServerCounts bAcquire = rt.perOp(rawB(false));
  const ServerCounts bCycle = rt.perOp(rawB(true));

  const std::string source =
      rt.statementsAvailable()
          ? "server: pg_stat_statements calls, pg_stat_database xact_commit"
          : "server: pg_stat_database xact_commit (pg_stat_statements not "
            "preloaded: statements n/a)";
  auto add = [&](const std::string& workload, const std::string& op,
                 const ServerCounts& c) {
    Result r;
    r.workload = workload;
    r.store = "postgres";
    r.config = op;
    r.ratio =
        fmt::format("{} statements, {:.2f} transactions per {}",
                    c.statements < 0 ? std::string("n/a")
                                     : fmt::format("{:.2f}", c.statements),
                    c.transactions, op);
    r.extra = source;
    r.numbers["statements"] = c.statements;
    r.numbers["transactions"] = c.transactions;
    ctx.report.add(r);
  };
  ServerCounts libRelease{libCycle.transactions - libAcquire.transactions,
                          rt.statementsAvailable()
                              ? libCycle.statements - libAcquire.statements
                              : -1};
  ServerCounts bRelease{
      bCycle.transactions - bAcquire.transactions,
      rt.statementsAvailable() ? bCycle.statements - bAcquire.statements : -1};
  add("roundtrips", "acquire", libAcquire);
  add("roundtrips", "release", libRelease);
  add("roundtrips.base_b", "acquire", bAcquire);
  add("roundtrips.base_b", "release", bRelease);

  auto one = [](double v) { return std::fabs(v - 1.0) < 0.05; };
  for (const auto& [op, c] :
       {std::make_pair(std::string("acquire"), libAcquire),
        std::make_pair(std::string("release"), libRelease)}) {
    const bool met =
        one(c.transactions) && (!rt.statementsAvailable() || one(c.statements));
    ctx.report.addTarget(
        fmt::format("1 statement and 1 transaction per {}: {} statements, "
                    "{:.2f} transactions ({})",
                    op,
                    c.statements < 0 ? std::string("n/a")
                                     : fmt::format("{:.2f}", c.statements),
                    c.transactions, source),
        met);
  }
  admin.exec(
      fmt::format("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", ctx.rtDb));
}

// --- contended try
// -------------------------------------------------------------

void runContended(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  const int ttl = f.ttlMs;
  for (int threads : f.contendedThreads) {
    const std::string config = fmt::format("threads={} one key", threads);
    auto manager =
        makeManager(ctx.conninfo, threads, "lib", cycleConfiguration(f));
    dlm::DistributedLockManager* m = manager.get();
    auto worker = [&](int variant, int t) -> Operation {
      if (variant == 0) {
        auto lock = std::make_shared<dlm::Lock>(
            m->getLockInstance("contended", dlm::LockLevel::DC));
        return [m, lock]() {
          try {
            m->tryAcquireLock(*lock);
          } catch (const dlm::DLMException& e) {
            if (e.code() != dlm::ErrorCode::LOCK_UNAVAILABLE) throw;
            return 1;
          }
          m->releaseLock(*lock);
          return 0;
        };
      }
      if (variant == 2) {
        auto e = std::make_shared<RawShedLock>(ctx.conninfo, 9200 + t);
        return [e, ttl]() {
          if (!e->lock("contended", ttl)) return 1;
          e->unlock("contended");
          return 0;
        };
      }
      auto c = std::make_shared<RawFunctions>(ctx.conninfo, 9000 + t);
      const std::string k = key("rawa", "contended");
      return [c, k, ttl]() {
        if (!c->acquire(k, ttl)) return 1;
        c->release(k);
        return 0;
      };
    };
    const std::vector<RunStats> runs = interleaved(
        3, f.rounds, f.seconds, f.warmup,
        [&](int variant, double seconds, double warmup) {
          return timedRun(threads, seconds, warmup,
                          [&](int t) { return worker(variant, t); });
        });
    manager->destroy();
    manager.reset();
    const RunStats &lib = runs[0], &raw = runs[1], &shed = runs[2];
    auto describe = [](const RunStats& s) {
      return fmt::format(
          "{:.0f} acquired/s, {:.0f} refused/s (latency: one "
          "try, + release when acquired)",
          s.byTag[0] / s.seconds, s.byTag[1] / s.seconds);
    };
    Result r = fromStats("contended", config, lib);
    r.opsPerSec = lib.byTag[0] / lib.seconds;
    const double rawOk = raw.byTag[0] / raw.seconds;
    const double shedOk = shed.byTag[0] / shed.seconds;
    r.ratio = fmt::format("{:.2f}x a, {:.2f}x e (acquired/s)",
                          r.opsPerSec / rawOk, r.opsPerSec / shedOk);
    r.numbers["ratio_e"] = r.opsPerSec / shedOk;
    r.extra = describe(lib);
    r.numbers["acquired_per_s"] = r.opsPerSec;
    r.numbers["refused_per_s"] = lib.byTag[1] / lib.seconds;
    ctx.report.add(r);
    Result b = fromStats("contended.base_a", config, raw);
    b.opsPerSec = rawOk;
    b.extra = describe(raw);
    b.numbers["acquired_per_s"] = rawOk;
    b.numbers["refused_per_s"] = raw.byTag[1] / raw.seconds;
    ctx.report.add(b);
    Result be = fromStats("contended.base_e", config, shed);
    be.opsPerSec = shedOk;
    be.extra = describe(shed) + "; " + kShedLockCycleNote;
    be.numbers["acquired_per_s"] = shedOk;
    be.numbers["refused_per_s"] = shed.byTag[1] / shed.seconds;
    ctx.report.add(be);
  }
}

// --- handoff -----------------------------------------------------------------

// The raw floor of a wake-up: NOTIFY on one connection until the LISTENing
// one has it, from just before sending.
Samples notifyLatency(const std::string& conninfo, int rounds) {
  PgConn listener(conninfo);
  PgConn notifier(conninfo);
  listener.exec("LISTEN bench_handoff");
  Samples s;
  for (int i = 0; i < rounds; ++i) {
    const std::int64_t t0 = nowNs();
    notifier.exec("NOTIFY bench_handoff");
    for (bool got = false; !got;) {
      pollfd p{PQsocket(listener.raw()), POLLIN, 0};
      PQconsumeInput(listener.raw());
      while (PGnotify* n = PQnotifies(listener.raw())) {
        PQfreemem(n);
        got = true;
      }
      if (!got) poll(&p, 1, 1000);
    }
    s.add((nowNs() - t0) / 1e3);
  }
  return s;
}

void runHandoffPg(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  const Samples notify = notifyLatency(ctx.conninfo, 300);
  const double notifyP50 = notify.percentileUs(50) / 1e3;
  {
    Result r;
    r.workload = "handoff.base_notify";
    r.store = "postgres";
    r.config = "raw LISTEN/NOTIFY";
    r.p50Ms = notifyP50;
    r.p99Ms = notify.percentileUs(99) / 1e3;
    r.extra = "raw libpq: NOTIFY until the LISTENing connection has it";
    ctx.report.add(r);
  }
  const dlm::LockConfiguration config = handoffConfiguration(f);
  std::string mode;
  bool delivers = false;
  double p50AtOne = -1;
  struct Run {
    int waiters;
    bool shared;
  };
  std::vector<Run> runs;
  for (int n : f.waiters) runs.push_back({n, false});
  runs.push_back({4, true});
  for (const Run& run : runs) {
    std::vector<std::unique_ptr<dlm::DistributedLockManager>> owned;
    std::vector<dlm::DistributedLockManager*> managers;
    const int threads = run.waiters + 1;
    if (run.shared) {
      owned.push_back(
          makeManager(ctx.conninfo, threads + 1, "handoff", config));
      for (int j = 0; j < threads; ++j) managers.push_back(owned[0].get());
    } else {
      for (int j = 0; j < threads; ++j) {
        owned.push_back(makeManager(ctx.conninfo, 2, "handoff", config));
        managers.push_back(owned.back().get());
      }
    }
    if (mode.empty()) delivers = storeDeliversReleases(owned[0]->store());
    const HandoffOutcome h = runHandoff(
        managers,
        fmt::format("handoff{}{}", run.waiters, run.shared ? "s" : ""), f);
    for (auto& m : owned) m->destroy();
    Result r;
    r.workload = "handoff";
    r.store = "postgres";
    r.config = fmt::format(
        "waiters={} {}", run.waiters,
        run.shared ? "one shared manager" : "one manager+store each");
    r.opsPerSec = h.handoffs / h.seconds;
    r.p50Ms = h.samples.percentileUs(50) / 1e3;
    r.p99Ms = h.samples.percentileUs(99) / 1e3;
    if (mode.empty()) {
      p50AtOne = r.p50Ms;
      mode = handoffMode(r.p50Ms, f.sleepMs);
    }
    r.ratio = fmt::format("{:.1f}x notify p50", r.p50Ms / notifyP50);
    r.extra = fmt::format(
        "release start -> next acquireLock returns; {} handoffs, {} "
        "timeouts; sleepBetweenRetries={} ms, hold={} ms; store "
        "subscribeReleases: {}; observed: {}",
        h.handoffs, h.timeouts, f.sleepMs, f.holdMs,
        delivers ? "active" : "inactive", mode);
    r.numbers["waiters"] = run.waiters;
    r.numbers["shared_manager"] = run.shared ? 1 : 0;
    r.numbers["sleep_ms"] = f.sleepMs;
    ctx.report.add(r);
  }
  ctx.report.addTarget(
      fmt::format("handoff p50 <= 1 ms on PostgreSQL with wake-up: {:.2f} ms "
                  "with 1 waiter ({}; sleepBetweenRetries={} ms)",
                  p50AtOne, mode, f.sleepMs),
      p50AtOne >= 0 && p50AtOne <= 1.0);
}

// --- scale -------------------------------------------------------------------

std::string depthId(int depth, int i) {
  std::string id = fmt::format("h{}", depth);
  for (int k = 2; k < depth; ++k) id += ".x";
  return id + fmt::format(".k{}", i);
}

// One lock table per size, each in its own schema, so that the sizes can be
// measured interleaved (a noisy minute hits them all alike).
struct ScaleTable {
  long rows = 0;
  std::string schema;
  long fillers = 0;  // rows "s%07d" (depth-1 keys)
  std::unique_ptr<dlm::DistributedLockManager> manager;
};

constexpr int kDepthLeaves = 100;

void fillScaleTable(const Ctx& ctx, PgConn& c, ScaleTable& t) {
  const Flags& f = ctx.flags;
  c.exec(fmt::format("DROP SCHEMA IF EXISTS {} CASCADE", t.schema));
  c.exec(fmt::format("CREATE SCHEMA {}", t.schema));
  makeManager(ctx.conninfo, 1, "setup", dlm::LockConfiguration{}, true,
              t.schema)
      ->destroy();
  c.exec(fmt::format("SET search_path = {}", t.schema));
  if (!f.pgAfterSchema.empty()) c.exec(f.pgAfterSchema);
  // Hierarchy pools: the path rows and kDepthLeaves leaves per depth.
  for (int d : f.depths) {
    if (d < 2) continue;
    std::string path = fmt::format("h{}", d);
    for (int k = 1; k < d; ++k) {
      if (k > 1) path += ".x";
      c.exec(fmt::format(
          "INSERT INTO dlm_locks (resource, resource_crc) VALUES ('{}', 0)",
          key("lib", path)));
    }
    c.exec(fmt::format(
        "INSERT INTO dlm_locks (resource, resource_crc) SELECT '{}.k' || i, "
        "0 FROM generate_series(0, {}) i",
        key("lib", path), kDepthLeaves - 1));
  }
  const long existing = std::stol(c.value("SELECT count(*) FROM dlm_locks"));
  t.fillers = std::max(1L, t.rows - existing);
  const std::int64_t t0 = nowNs();
  // Mostly FREE rows, one in ten HELD but long expired, as a table that has
  // been in use for a while; one INSERT ... SELECT.
  c.exec(fmt::format(
      "INSERT INTO dlm_locks (resource, resource_crc, status, owner_id, "
      "token, fencing_token, acquired_at, ttl_ms, expires_at) SELECT "
      "'{}' || lpad(g::text, 7, '0'), 0, CASE WHEN g % 10 = 0 THEN "
      "'HELD' ELSE 'FREE' END, 'filler', 'filler-' || g, 1 + g % 7, "
      "now() - interval '2 hours', 60000, now() - interval '119 minutes' "
      "FROM generate_series(0, {}) g",
      key("lib", "s"), t.fillers - 1));
  c.exec("VACUUM ANALYZE dlm_locks");
  c.exec("RESET search_path");
  std::cout << fmt::format("  (scale: {} rows in schema {} filled in {:.1f} s)",
                           t.rows, t.schema, (nowNs() - t0) / 1e9)
            << std::endl;
  t.manager = makeManager(ctx.conninfo, 1, "lib", cycleConfiguration(f), false,
                          t.schema);
}

void runScale(const Ctx& ctx, std::vector<std::string>* rowsDat,
              std::vector<std::string>* depthDat) {
  const Flags& f = ctx.flags;
  PgConn c(ctx.conninfo);
  // A checkpoint now, not in the middle of the measurements (5 min apart by
  // default); pages the fill wrote need no full-page image until the next.
  c.exec("CHECKPOINT");
  std::vector<ScaleTable> tables(f.rows.size());
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    tables[i].rows = f.rows[i];
    tables[i].schema = fmt::format("scale_{}", f.rows[i]);
    fillScaleTable(ctx, c, tables[i]);
  }
  struct Combo {
    std::size_t table;
    int depth;
  };
  std::vector<Combo> combos;
  for (std::size_t i = 0; i < tables.size(); ++i) {
    for (int d : f.depths) {
      if (d == 1 || i == 0 || i + 1 == tables.size()) combos.push_back({i, d});
    }
  }
  const std::vector<RunStats> runs = interleaved(
      static_cast<int>(combos.size()), f.rounds, f.seconds, f.warmup,
      [&](int v, double seconds, double warmup) {
        const Combo combo = combos[v];
        dlm::DistributedLockManager* m = tables[combo.table].manager.get();
        const long fillers = tables[combo.table].fillers;
        const int depth = combo.depth;
        return timedRun(1, seconds, warmup, [&](int) -> Operation {
          std::mt19937_64 rng(11 + v);
          return [m, fillers, depth, rng]() mutable {
            const std::string id =
                depth <= 1
                    ? fmt::format("s{:07d}", rng() % fillers)
                    : depthId(depth, static_cast<int>(rng() % kDepthLeaves));
            dlm::Lock lock = m->getLockInstance(id, dlm::LockLevel::DC);
            m->tryAcquireLock(lock);
            m->releaseLock(lock);
            return 0;
          };
        });
      });
  for (auto& t : tables) t.manager->destroy();

  auto p50Of = [&](std::size_t table, int depth) {
    for (std::size_t v = 0; v < combos.size(); ++v) {
      if (combos[v].table == table && combos[v].depth == depth) {
        return runs[v].latency.percentileUs(50) / 1e3;
      }
    }
    return -1.0;
  };
  const double baseP50 = p50Of(0, 1);
  for (std::size_t v = 0; v < combos.size(); ++v) {
    const ScaleTable& t = tables[combos[v].table];
    const int d = combos[v].depth;
    Result r =
        fromStats("scale", fmt::format("rows={} depth={}", t.rows, d), runs[v]);
    if (d == 1) {
      r.ratio =
          fmt::format("{:.2f}x p50 at rows={}", r.p50Ms / baseP50, f.rows[0]);
      rowsDat->push_back(
          fmt::format("{} {:.4f} {:.4f}", t.rows, r.p50Ms, r.p99Ms));
    } else {
      const double one = p50Of(combos[v].table, 1);
      r.ratio = fmt::format("{:.2f}x depth=1", r.p50Ms / one);
      depthDat->push_back(
          fmt::format("{} {} {:.4f} {:.4f}", t.rows, d, r.p50Ms, r.p99Ms));
    }
    r.extra = "1 thread, acquire+release of random existing keys";
    r.numbers["rows"] = static_cast<double>(t.rows);
    r.numbers["depth"] = d;
    ctx.report.add(r);
  }
  if (tables.size() > 1) {
    const double last = p50Of(tables.size() - 1, 1);
    ctx.report.addTarget(
        fmt::format("scale: p50 at {} rows <= 1.2x p50 at {} rows: {:.3f} vs "
                    "{:.3f} ms = {:.2f}x",
                    tables.back().rows, tables.front().rows, last, baseP50,
                    last / baseP50),
        last <= 1.2 * baseP50);
  }
  const int maxDepth = *std::max_element(f.depths.begin(), f.depths.end());
  if (maxDepth > 1) {
    for (std::size_t i : {std::size_t{0}, tables.size() - 1}) {
      const double one = p50Of(i, 1), deep = p50Of(i, maxDepth);
      ctx.report.addTarget(
          fmt::format("scale: depth {} p50 <= 2x depth 1 (rows={}): {:.3f} vs "
                      "{:.3f} ms = {:.2f}x",
                      maxDepth, tables[i].rows, deep, one, deep / one),
          deep <= 2 * one);
      if (tables.size() == 1) break;
    }
  }
}

}  // namespace

void runPostgres(const Flags& f, Report& report, Machine& machine) {
  PgConn admin(f.pgConnection);
  machine.postgresVersion = admin.value("SHOW server_version");
  Ctx ctx{f,
          report,
          withDatabase(f.pgConnection, f.dbName),
          withDatabase(f.pgConnection, f.dbName + "_rt"),
          f.dbName + "_rt",
          admin};
  createDatabase(admin, f.dbName);
  createSchema(ctx.conninfo, f);
  std::cout << fmt::format(
                   "PostgreSQL {} (database {}); synchronous_commit={}, "
                   "fsync={}",
                   machine.postgresVersion, f.dbName,
                   admin.value("SHOW synchronous_commit"),
                   admin.value("SHOW fsync"))
            << std::endl;
  if (!f.pgAfterSchema.empty()) {
    std::cout << "after the schema: " << f.pgAfterSchema << std::endl;
  }

  if (f.wants("cycle")) runCycle(ctx);
  if (f.wants("roundtrips")) runRoundTrips(ctx, admin);
  if (f.wants("contended")) runContended(ctx);
  if (f.wants("extend")) runExtend(ctx);
  if (f.wants("handoff")) runHandoffPg(ctx);
  if (f.wants("readers")) {
    auto manager =
        makeManager(ctx.conninfo, static_cast<std::size_t>(f.readersThreads),
                    "lib", readersConfiguration(f));
    runReaders({manager.get()}, "postgres",
               fmt::format("one manager, pool {}", f.readersThreads), f,
               report);
    manager->destroy();
  }
  if (f.wants("scale")) {
    std::vector<std::string> rowsDat, depthDat;
    runScale(ctx, &rowsDat, &depthDat);
    if (!f.resultsDir.empty()) {
      std::ofstream a(f.resultsDir + "/scale_rows.dat");
      a << "# rows p50_ms p99_ms (depth 1, PostgreSQL, 1 thread)\n";
      for (const auto& l : rowsDat) a << l << "\n";
      std::ofstream b(f.resultsDir + "/scale_depth.dat");
      b << "# rows depth p50_ms p99_ms (PostgreSQL, 1 thread)\n";
      for (const auto& l : depthDat) b << l << "\n";
    }
  }
  // Baseline e's table goes with the run (the database itself is dropped
  // when the next run starts).
  PgConn(ctx.conninfo)
      .exec(fmt::format("DROP TABLE IF EXISTS {}", kShedLockTable));
}

}  // namespace dlm_bench
