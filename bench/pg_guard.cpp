// What a guard costs (issue 24): the application's own transaction
//   BEGIN; guardWithin(lock, tx); UPDATE one row of its table; COMMIT
// against the same transaction without guardWithin, interleaved, through
// libpqxx on the application's own connection (as an application does);
// then server time and WAL per transaction of each (pg_stat_statements,
// pg_stat_wal): the guard is one statement in the transaction and must add
// no WAL flush (its row lock, FOR SHARE on the key's row, writes a WAL
// record, flushed with the transaction's own commit).
#include <dlm/postgres_store.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg_common.h"
#include "pg_server_time.h"

namespace dlm_bench::pg {

namespace {

// The held lock outlives any slice of the run (no renewal while measuring).
constexpr std::chrono::hours kHeldTtl{1};
constexpr int kMaxThreads = 4;
constexpr const char* kUpdate = "UPDATE bench_app SET n = n + 1 WHERE id = $1";

// One row per worker thread, existing (an UPDATE, as in a table in use).
void createAppTable(const std::string& conninfo) {
  PgConn c(conninfo);
  c.exec(
      "CREATE TABLE IF NOT EXISTS bench_app (id int PRIMARY KEY, n bigint NOT "
      "NULL)");
  c.exec(fmt::format(
      "INSERT INTO bench_app SELECT i, 0 FROM generate_series(0, {}) i ON "
      "CONFLICT DO NOTHING",
      kMaxThreads - 1));
  c.exec("VACUUM ANALYZE bench_app");
  c.exec("CHECKPOINT");
}

// A worker: the application's own connection, its row, and (guarded) a DC
// lock "guard.t<t>" held for the worker's life through `m`.
class AppWorker {
 public:
  AppWorker(const std::string& conninfo, dlm::DistributedLockManager* m, int t)
      : app_(conninfo), m_(m), row_(std::to_string(t)) {
    if (m_ != nullptr) {
      lock_.emplace(
          m_->getLockInstance(fmt::format("guard.t{}", t), dlm::LockLevel::DC));
      m_->tryAcquireLock(*lock_, kHeldTtl);
    }
  }
  AppWorker(const AppWorker&) = delete;
  AppWorker& operator=(const AppWorker&) = delete;
  ~AppWorker() {
    if (m_ == nullptr) return;
    try {
      m_->releaseLock(*lock_);
    } catch (const std::exception&) {
      // The run is over; the lease ends by itself.
    }
  }

  void transaction() {
    pqxx::work tx(app_);
    if (m_ != nullptr) m_->guardWithin(*lock_, dlm::PostgresTransaction(tx));
    const pqxx::result r = tx.exec_params(kUpdate, row_);
    if (r.affected_rows() != 1) throw std::runtime_error("bench_app: no row");
    tx.commit();
  }

 private:
  pqxx::connection app_;
  dlm::DistributedLockManager* m_;
  std::string row_;
  std::optional<dlm::Lock> lock_;
};

// m == nullptr: the transaction without the guard.
Operation appTransaction(const std::string& conninfo,
                         dlm::DistributedLockManager* m, int t) {
  auto worker = std::make_shared<AppWorker>(conninfo, m, t);
  return [worker] {
    worker->transaction();
    return 0;
  };
}

constexpr const char* kTransactionNote =
    "BEGIN; guardWithin (dlm_guard_within: FOR SHARE on the key's row); "
    "UPDATE one row of bench_app; COMMIT, libpqxx on the application's own "
    "connection";

}  // namespace

void runGuard(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  createAppTable(ctx.conninfo);
  for (int threads : {1, kMaxThreads}) {
    const std::string config = fmt::format("threads={}", threads);
    auto manager = makeManager(ctx.conninfo, static_cast<std::size_t>(threads),
                               "lib", cycleConfiguration(f));
    const std::vector<RunStats> runs = interleaved(
        2, f.rounds, f.seconds, f.warmup,
        [&](int variant, double seconds, double warmup) {
          return timedRun(threads, seconds, warmup, [&](int t) {
            return appTransaction(ctx.conninfo,
                                  variant == 0 ? manager.get() : nullptr, t);
          });
        });
    manager->destroy();
    const RunStats &guarded = runs[0], &unguarded = runs[1];
    const double ratio = guarded.opsPerSec() / unguarded.opsPerSec();
    const double p50Us =
        guarded.latency.percentileUs(50) - unguarded.latency.percentileUs(50);
    Result r = fromStats("guard", config, guarded);
    r.ratio = fmt::format("{:.2f}x unguarded", ratio);
    r.extra = fmt::format(
        "{}; p50 {:+.0f} us against unguarded; client CPU {:.0f} us/tx "
        "(unguarded: {:.0f})",
        kTransactionNote, p50Us, guarded.cpuUsPerOp(), unguarded.cpuUsPerOp());
    r.numbers["ratio_unguarded"] = ratio;
    ctx.report.add(r);
    Result b = fromStats("guard.base_unguarded", config, unguarded);
    b.extra = "the same transaction without guardWithin: BEGIN; UPDATE; COMMIT";
    ctx.report.add(b);
  }

  // Server time and WAL per transaction of each, one thread, fresh sessions.
  ServerProbe probe(ctx.admin, f.dbName, ctx.conninfo);
  const int ops = std::max(200, static_cast<int>(f.seconds * 250));
  const char* const names[2] = {"guarded", "unguarded"};
  ServerCost costs[2];
  for (int v = 0; v < 2; ++v) {
    costs[v] = probe.perOp(ops, [&](int n) {
      std::unique_ptr<dlm::DistributedLockManager> manager;
      if (v == 0) {
        manager = makeManager(probe.sessionConninfo(), 1, "lib",
                              cycleConfiguration(f));
      }
      {
        Operation op =
            appTransaction(probe.sessionConninfo(), manager.get(), 0);
        for (int i = 0; i < n; ++i) op();
      }
      if (manager) manager->destroy();
    });
    Result r;
    r.workload = "guard.server";
    r.store = "postgres";
    r.config = fmt::format("{} threads=1", names[v]);
    r.ratio = ServerProbe::summary(costs[v]);
    r.extra =
        fmt::format("per transaction: WAL {:.2f} records, {:.0f} bytes; {}",
                    costs[v].walRecords, costs[v].walBytes,
                    ServerProbe::breakdown(costs[v]));
    ServerProbe::addNumbers(costs[v], r);
    ctx.report.add(r);
  }
  if (costs[0].walSync >= 0) {
    const double extra = costs[0].walSync - costs[1].walSync;
    ctx.report.addTarget(
        fmt::format("guard adds no WAL flush: {:.2f} flushes per guarded "
                    "transaction, {:.2f} unguarded ({:+.2f})",
                    costs[0].walSync, costs[1].walSync, extra),
        extra < 0.1, "guarded writes");
  }
}

}  // namespace dlm_bench::pg
