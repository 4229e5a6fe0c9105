// The cycle's p50 with the table pre-filled to many rows and ids of
// several depths.
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
#include "workloads.h"

namespace dlm_bench::pg {

using std::chrono::milliseconds;
namespace {

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

}  // namespace

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

}  // namespace dlm_bench::pg
