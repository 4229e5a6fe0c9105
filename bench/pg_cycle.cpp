// The uncontended cycle against baselines (a)-(f), its server time per
// cycle (depth 1 and 8), and extendLock against (e)'s extend statement.
#include <dlm/dlm.h>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pg_baselines.h"
#include "pg_common.h"
#include "pg_server_time.h"
#include "pg_shedlock.h"
#include "pg_skeleton.h"
#include "workloads.h"

namespace dlm_bench::pg {

using std::chrono::milliseconds;
void prefillCycleRows(const Ctx& ctx, int maxThreads) {
  PgConn c(ctx.conninfo);
  const int keys = ctx.flags.keys;
  // Every variant finds its rows existing (an UPDATE, not an INSERT), as in
  // a table that has been in use.
  c.exec(fmt::format(
      "INSERT INTO dlm_locks (resource, resource_crc) SELECT "
      "format('DC#{}#%s#c%sk%s', v, t, i), 0 FROM unnest(ARRAY['lib', "
      "'rawa', 'rawb', 'rawf', 'rawg']) v, generate_series(0, {}) t, generate_series(0, {}) "
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

namespace {

constexpr int kCycleVariants = 7;
const char* const kCycleVariantNames[kCycleVariants] = {
    "dlm", "base_a", "base_b", "base_c", "base_d", "base_e", "base_f"};

}  // namespace

Operation cycleWorker(const Ctx& ctx, int variant, int t,
                      const std::string& conninfo,
                      dlm::DistributedLockManager* m) {
  const int ttl = ctx.flags.ttlMs;
  const int keys = ctx.flags.keys;
  switch (variant) {
    case 0:  // the library
      return libraryCycle(m, t, keys, 1000);
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
    case 6: {
      auto raw = std::make_shared<RawSkeleton>(conninfo, 9100 + t);
      std::mt19937_64 rng(9300 + t);
      return [raw, t, keys, ttl, rng]() mutable {
        const std::string k =
            key("rawf", cycleId(t, static_cast<int>(rng() % keys)));
        if (!raw->acquire(k, ttl)) throw std::runtime_error("f: refused");
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

void serverSlices(
    const Ctx& ctx, const std::vector<ServerVariant>& variants,
    const std::function<Operation(int variant, const std::string& conninfo,
                                  dlm::DistributedLockManager*)>& makeOp) {
  const Flags& f = ctx.flags;
  ServerProbe probe(ctx.admin, ctx.flags.dbName, ctx.conninfo);
  const int count = static_cast<int>(variants.size());
  const int rounds = std::max(1, f.rounds);
  const int ops = std::max(200, static_cast<int>(f.seconds * 250 / rounds));
  std::vector<std::vector<ServerCost>> costs(count);
  for (int round = 0; round < rounds; ++round) {
    for (int v = 0; v < count; ++v) {
      costs[v].push_back(probe.perOp(ops, [&](int n) {
        std::unique_ptr<dlm::DistributedLockManager> manager;
        if (variants[v].library) {
          manager = makeManager(probe.sessionConninfo(), 1, "lib",
                                cycleConfiguration(f));
        }
        {
          Operation op = makeOp(v, probe.sessionConninfo(), manager.get());
          for (int i = 0; i < n; ++i) op();
        }
        if (manager) manager->destroy();
      }));
    }
  }
  for (int v = 0; v < count; ++v) {
    std::vector<ServerCost>& mine = costs[v];
    std::sort(mine.begin(), mine.end(),
              [](const ServerCost& a, const ServerCost& b) {
                return a.serverUs < b.serverUs;
              });
    const ServerCost& cost = mine[mine.size() / 2];
    Result r;
    r.workload = variants[v].workload + ".server";
    r.store = "postgres";
    r.config = variants[v].config + " threads=1";
    r.ratio = ServerProbe::summary(cost);
    r.extra = fmt::format(
        "{}; median of {} rounds (server {:.1f} to {:.1f} us); {}",
        variants[v].what, mine.size(), mine.front().serverUs,
        mine.back().serverUs, ServerProbe::breakdown(cost));
    ServerProbe::addNumbers(cost, r);
    ctx.report.add(r);
  }
}

void serverSlices(
    const Ctx& ctx, const std::string& workload, const std::string& what,
    int variants, const char* const* names,
    const std::function<Operation(int variant, const std::string& conninfo,
                                  dlm::DistributedLockManager*)>& makeOp) {
  std::vector<ServerVariant> list;
  for (int v = 0; v < variants; ++v) {
    list.push_back(ServerVariant{workload, names[v], what, v == 0});
  }
  serverSlices(ctx, list, makeOp);
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
                   &d = runs[4], &e = runs[5], &sk = runs[6];

    const double ra = lib.opsPerSec() / a.opsPerSec();
    const double rb = lib.opsPerSec() / b.opsPerSec();
    const double rc = lib.opsPerSec() / c.opsPerSec();
    const double rd = lib.opsPerSec() / d.opsPerSec();
    const double re = lib.opsPerSec() / e.opsPerSec();
    const double rf = lib.opsPerSec() / sk.opsPerSec();
    Result r = fromStats("cycle", config, lib);
    r.ratio = fmt::format(
        "{:.2f}x a, {:.2f}x b, {:.2f}x c, {:.2f}x d, {:.2f}x e, {:.2f}x f", ra,
        rb, rc, rd, re, rf);
    r.extra = fmt::format(
        "tryAcquireLock+releaseLock, DC key, depth 1, hierarchy on; client "
        "CPU {:.0f} us/cycle (a: {:.0f})",
        lib.cpuUsPerOp(), a.cpuUsPerOp());
    r.numbers["ratio_a"] = ra;
    r.numbers["ratio_b"] = rb;
    r.numbers["ratio_c"] = rc;
    r.numbers["ratio_d"] = rd;
    r.numbers["ratio_e"] = re;
    r.numbers["ratio_f"] = rf;
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
    Result rf_ = fromStats("cycle.base_f", config, sk);
    rf_.extra =
        "raw libpq: the protocol's PL/pgSQL skeleton (SECURITY DEFINER, "
        "pinned search_path): acquire = row lock FOR UPDATE, then UPDATE; "
        "release = one UPDATE, lazily committed; no checks";
    ctx.report.add(rf_);

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
  // The cycle's variants and the library's cycle on ids 8 segments deep
  // (7 ancestors locked FOR KEY SHARE, checked for holds, SHARED holds and
  // requests), taking turns.
  std::vector<ServerVariant> variants;
  for (int v = 0; v < kCycleVariants; ++v) {
    variants.push_back(ServerVariant{"cycle", kCycleVariantNames[v],
                                     "per cycle (acquire + release)", v == 0});
  }
  variants.push_back(ServerVariant{"cycle.depth8", "dlm depth=8",
                                   "per cycle (acquire + release), id depth 8",
                                   true});
  serverSlices(
      ctx, variants,
      [&](int v, const std::string& conninfo,
          dlm::DistributedLockManager* m) -> Operation {
        if (v < kCycleVariants) return cycleWorker(ctx, v, 0, conninfo, m);
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

namespace {

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

}  // namespace

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

Operation libraryCycle(dlm::DistributedLockManager* m, int t, int keys,
                       std::uint64_t seed) {
  std::mt19937_64 rng(seed + static_cast<std::uint64_t>(t));
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

}  // namespace dlm_bench::pg
