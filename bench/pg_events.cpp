// What events and metrics cost: the uncontended library cycle
// with an event handler that formats every event into a line (written to a
// stream that discards it), against the same cycle without a handler,
// interleaved. Counters and histograms are always on (relaxed atomics); the
// handler is what can be switched.
#include <dlm/lock_events.h>
#include <fmt/format.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "pg_common.h"
#include "workloads.h"

namespace dlm_bench::pg {

void runEvents(const Ctx& ctx) {
  const Flags& f = ctx.flags;
  std::ostream discard(nullptr);  // formats nothing further; lines dropped
  for (int threads : {1, 4}) {
    const std::string config = fmt::format("threads={}", threads);
    const auto n = static_cast<std::size_t>(threads);
    auto off = makeManager(ctx.conninfo, n, "lib", cycleConfiguration(f));
    auto on = makeManager(ctx.conninfo, n, "lib", cycleConfiguration(f), false,
                          "", false, dlm::makeStreamEventHandler(discard));
    const std::vector<RunStats> runs =
        interleaved(2, f.rounds, f.seconds, f.warmup,
                    [&](int variant, double seconds, double warmup) {
                      auto* m = variant == 0 ? on.get() : off.get();
                      return timedRun(threads, seconds, warmup, [&](int t) {
                        return libraryCycle(m, t, f.keys, 9000);
                      });
                    });
    const std::uint64_t events = on->metrics().acquisitions * 2;
    on->destroy();
    off->destroy();
    const RunStats &withEvents = runs[0], &without = runs[1];
    const double ratio = withEvents.opsPerSec() / without.opsPerSec();
    Result r = fromStats("events", config, withEvents);
    r.ratio = fmt::format("{:.3f}x no handler", ratio);
    r.extra = fmt::format(
        "tryAcquireLock+releaseLock with a stream event handler formatting "
        "each ACQUIRED/RELEASED line ({} events); client CPU {:.1f} us/cycle "
        "(no handler: {:.1f})",
        events, withEvents.cpuUsPerOp(), without.cpuUsPerOp());
    r.numbers["ratio_off"] = ratio;
    ctx.report.add(r);
    Result b = fromStats("events.base_off", config, without);
    b.extra = "the same cycle without an event handler (counters on)";
    ctx.report.add(b);
  }
}

}  // namespace dlm_bench::pg
