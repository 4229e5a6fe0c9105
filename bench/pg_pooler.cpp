// The uncontended cycle through PgBouncer in transaction pooling (a
// pooler-safe store: each call's settings sent in the same pipeline as its
// statement) against the same cycle straight to the server, interleaved.
#include <dlm/postgres_store.h>
#include <fmt/format.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg_common.h"
#include "workloads.h"

namespace dlm_bench::pg {
void runPooler(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  const std::string pooled = withDatabase(f.pgPooler, f.dbName);
  for (int threads : {1, 4}) {
    const std::string config = fmt::format("threads={}", threads);
    const auto n = static_cast<std::size_t>(threads);
    auto direct = makeManager(ctx.conninfo, n, "lib", cycleConfiguration(f));
    auto viaPooler = makeManager(pooled, n, "lib", cycleConfiguration(f), false,
                                 "", /*poolerSafe=*/true);
    // The mode's own cost: pooler-safe calls straight to the server.
    auto safeDirect = makeManager(ctx.conninfo, n, "lib", cycleConfiguration(f),
                                  false, "", /*poolerSafe=*/true);
    const std::vector<RunStats> runs =
        interleaved(3, f.rounds, f.seconds, f.warmup,
                    [&](int variant, double seconds, double warmup) {
                      auto* m = variant == 0   ? viaPooler.get()
                                : variant == 1 ? direct.get()
                                               : safeDirect.get();
                      return timedRun(threads, seconds, warmup, [&](int t) {
                        return libraryCycle(m, t, f.keys, 7000);
                      });
                    });
    viaPooler->destroy();
    direct->destroy();
    safeDirect->destroy();
    const RunStats &pooler = runs[0], &straight = runs[1], &safe = runs[2];
    Result r = fromStats("pooler", config, pooler);
    r.ratio = fmt::format("{:.2f}x direct",
                          pooler.opsPerSec() / straight.opsPerSec());
    r.extra = fmt::format(
        "tryAcquireLock+releaseLock through PgBouncer (transaction pooling, "
        "poolerSafe); client CPU {:.0f} us/cycle (direct: {:.0f})",
        pooler.cpuUsPerOp(), straight.cpuUsPerOp());
    r.numbers["ratio_direct"] = pooler.opsPerSec() / straight.opsPerSec();
    ctx.report.add(r);
    Result d = fromStats("pooler.base_direct", config, straight);
    d.extra =
        "the same cycle straight to the server (named statements, "
        "session settings)";
    ctx.report.add(d);
    Result m = fromStats("pooler.safe_direct", config, safe);
    m.ratio =
        fmt::format("{:.2f}x direct", safe.opsPerSec() / straight.opsPerSec());
    m.extra = fmt::format(
        "poolerSafe straight to the server (the mode's own cost: settings "
        "and unnamed statements in a pipeline); client CPU {:.0f} us/cycle",
        safe.cpuUsPerOp());
    ctx.report.add(m);
  }
}

}  // namespace dlm_bench::pg
