// What the PostgreSQL workloads of dlm_bench share: the run's context, how
// they build the measured manager, key names, result rows and the notes of
// baseline (e). One file per workload (pg_cycle.cpp, pg_contention.cpp,
// pg_roundtrips.cpp, pg_scale.cpp); pg_bench.cpp runs them.
#pragma once

#include <dlm/dlm.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "pg_raw.h"

namespace dlm_bench::pg {

inline constexpr const char* kFarm = "bench";

struct Ctx {
  const Flags& flags;
  Report& report;
  std::string conninfo;    // the bench database
  std::string rtConninfo;  // the round-trip database (nothing else uses it)
  std::string rtDb;
  PgConn& admin;  // outside the bench database (statistics)
};

dlm::LockConfiguration cycleConfiguration(const Flags& flags);

// Drops and creates database `db`.
void createDatabase(PgConn& admin, const std::string& db);
// The dlm schema (through the library's migration opt-in) and the peer
// tables of baselines d and e.
void createSchema(const std::string& conninfo, const Flags& f);

// A manager on its own PostgresStore (pool of `pool` connections;
// poolerSafe: PostgresStoreOptions::poolerSafe).
std::unique_ptr<dlm::DistributedLockManager> makeManager(
    const std::string& conninfo, std::size_t pool, const std::string& client,
    const dlm::LockConfiguration& config, bool migrate = false,
    const std::string& schema = "", bool poolerSafe = false,
    std::shared_ptr<dlm::LockEventHandler> events = nullptr,
    const std::string& applicationName = "");

// The scoped key the library builds for `id` of `client` (DC level).
std::string key(const std::string& client, const std::string& id);
// Thread t's i-th cycle id.
std::string cycleId(int t, int i);
Result fromStats(const std::string& workload, const std::string& config,
                 const RunStats& s);
// One uncontended cycle of thread t through m: tryAcquireLock + releaseLock
// of a random id of its pool of `keys` (random sequence from seed + t).
Operation libraryCycle(dlm::DistributedLockManager* m, int t, int keys,
                       std::uint64_t seed);
// Existing, free rows for the cycle's keys of threads 0..maxThreads-1 of
// the library ("lib"), (a), (b), (f), (d) and (e); VACUUM ANALYZE; CHECKPOINT.
void prefillCycleRows(const Ctx& ctx, int maxThreads);
// One cycle worker of thread t: variant 0 the library (through m), 1-6
// baselines a-f, each on its own keys of thread t, connected through
// `conninfo`.
Operation cycleWorker(const Ctx& ctx, int variant, int t,
                      const std::string& conninfo,
                      dlm::DistributedLockManager* m);

inline constexpr const char* kShedLockCycleNote =
    "raw libpq (ShedLock's statements): UPDATE .. WHERE name = $1 AND "
    "lock_until <= now(); UPDATE .. SET lock_until = now() WHERE name = $1 "
    "AND locked_by = $2; prepared, autocommit, rows exist";
inline constexpr const char* kShedLockExtendNote =
    "raw libpq (ShedLock's statement): UPDATE .. SET lock_until = now() + ttl "
    "WHERE name = $1 AND locked_by = $2 AND lock_until > now(); prepared, "
    "autocommit";

// One measured variant of serverSlices: its report line is
// "<workload>.server" / "<config> threads=1"; `library` variants get a
// manager connected through the measured session.
struct ServerVariant {
  std::string workload;
  std::string config;
  std::string what;
  bool library = false;
};

// Server time and WAL per operation of each variant (1 thread), the
// variants taking turns in --rounds rounds, each line the round with its
// variant's median server time. makeOp gets the variant's index, the
// measured session's connection string and (library variants) a manager
// connected through it.
void serverSlices(
    const Ctx& ctx, const std::vector<ServerVariant>& variants,
    const std::function<Operation(int variant, const std::string& conninfo,
                                  dlm::DistributedLockManager*)>& makeOp);

// The same for variants of one workload named by `names`; variant 0 is
// the library.
void serverSlices(
    const Ctx& ctx, const std::string& workload, const std::string& what,
    int variants, const char* const* names,
    const std::function<Operation(int variant, const std::string& conninfo,
                                  dlm::DistributedLockManager*)>& makeOp);

void runCycle(const Ctx& ctx);
void runExtend(const Ctx& ctx);
// The cycle with 100,000 live requests and SHARED holds on other keys
// against the cycle without them (a second database), interleaved.
void runJunk(const Ctx& ctx);
void runRoundTrips(const Ctx& ctx, PgConn& admin);
void runContended(const Ctx& ctx);
void runHandoffPg(const Ctx& ctx);
// The cycle through flags.pgPooler (pg_pooler.cpp).
void runPooler(const Ctx& ctx);
// The cycle with and without an event handler (pg_events.cpp).
void runEvents(const Ctx& ctx);
// An application transaction with and without guardWithin (pg_guard.cpp).
void runGuard(const Ctx& ctx);
// Fills the .dat lines of the scale plots.
void runScale(const Ctx& ctx, std::vector<std::string>* rowsDat,
              std::vector<std::string>* depthDat);

}  // namespace dlm_bench::pg
