// PostgreSQL workloads: the library through its public API, and the raw
// libpq baselines of the same work, in one process and one run. This file
// prepares the database and runs the workloads (pg_cycle.cpp,
// pg_contention.cpp, pg_roundtrips.cpp, pg_scale.cpp).
#include <dlm/postgres_store.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "pg_batch_floor.h"
#include "pg_common.h"
#include "pg_cost.h"
#include "pg_raw.h"
#include "pg_shedlock.h"
#include "pg_skeleton.h"
#include "workloads.h"

namespace dlm_bench {
namespace pg {

dlm::LockConfiguration cycleConfiguration(const Flags& flags) {
  dlm::LockConfiguration c;
  c.lockTtl = std::chrono::milliseconds(flags.ttlMs);
  return c;
}

std::unique_ptr<dlm::DistributedLockManager> makeManager(
    const std::string& conninfo, std::size_t pool, const std::string& client,
    const dlm::LockConfiguration& config, bool migrate,
    const std::string& schema, bool poolerSafe,
    std::shared_ptr<dlm::LockEventHandler> events,
    const std::string& applicationName) {
  dlm::PostgresStoreOptions o;
  if (!applicationName.empty()) o.applicationName = applicationName;
  o.connection = conninfo;
  o.poolSize = pool;
  o.schema = schema;
  o.poolerSafe = poolerSafe;
  auto store = std::make_shared<dlm::PostgresStore>(o);
  auto m = dlm::DistributedLockManager::builder()
               .clientId(client)
               .farmId(kFarm)
               .store(store)
               .configuration(config)
               .applyMigrations(migrate)
               .events(std::move(events))
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
  createSkeletonFunctions(c);
  createBatchSkeletonFunctions(c);
  c.exec(fmt::format(
      "INSERT INTO {} SELECT n, now() - interval '1 hour', now() - interval "
      "'1 hour', 'nobody' FROM unnest(ARRAY['contended', 'extend']) n",
      kShedLockTable));
}

}  // namespace pg

void runPostgres(const Flags& f, Report& report, Machine& machine) {
  using namespace pg;
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

  // cost measures the PostgreSQL cycle, contended and extend (rates and
  // what the server pays); the older lines run when asked for without it.
  const bool cost = f.wants("cost");
  std::unique_ptr<PgConn> meterConn;
  std::unique_ptr<ServerMeter> meter;
  if (cost) {
    meterConn = std::make_unique<PgConn>(f.pgConnection);
    meter = std::make_unique<ServerMeter>(*meterConn);
    runCost(ctx, *meter, "local");
  }
  if (f.wants("floor") && !cost) {
    meterConn = std::make_unique<PgConn>(f.pgConnection);
    meter = std::make_unique<ServerMeter>(*meterConn);
    runFloor(ctx, *meter, "local");
  }
  if (f.wants("cycle") && !cost) runCycle(ctx);
  if (f.wants("roundtrips")) runRoundTrips(ctx, admin);
  if (f.wants("contended")) runContended(ctx);
  if (f.wants("extend")) runExtend(ctx);
  if (f.wants("junk")) runJunk(ctx);
  if (f.wants("handoff")) runHandoffPg(ctx);
  if (f.wants("pooler") && !f.pgPooler.empty()) runPooler(ctx);
  if (f.wants("events")) runEvents(ctx);
  if (f.wants("guard")) runGuard(ctx);
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
  // The same cost workloads with commits waiting for a synchronous standby
  // on loopback (how production runs it), last, so the other workloads ran
  // on the local disk alone.
  if (cost && !f.standbyStart.empty()) {
    std::cout << "=== synchronous standby: " << f.standbyStart << std::endl;
    if (std::system(f.standbyStart.c_str()) != 0) {
      throw std::runtime_error("could not start the standby: " +
                               f.standbyStart);
    }
    std::cout << fmt::format("synchronous_standby_names = '{}', sync "
                             "standbys: {}",
                             admin.value("SHOW synchronous_standby_names"),
                             admin.value("SELECT count(*) FROM "
                                         "pg_stat_replication WHERE "
                                         "sync_state = 'sync'"))
              << std::endl;
    try {
      runCost(ctx, *meter, "sync standby");
    } catch (...) {
      if (!f.standbyStop.empty() && std::system(f.standbyStop.c_str()) != 0) {
        std::cerr << "dlm_bench: could not stop the standby" << std::endl;
      }
      throw;
    }
    if (!f.standbyStop.empty() && std::system(f.standbyStop.c_str()) != 0) {
      std::cerr << "dlm_bench: could not stop the standby" << std::endl;
    }
    meter->refreshShared();
  }
  // Baseline e's table goes with the run (the database itself is dropped
  // when the next run starts).
  PgConn(ctx.conninfo)
      .exec(fmt::format("DROP TABLE IF EXISTS {}", kShedLockTable));
}

}  // namespace dlm_bench
