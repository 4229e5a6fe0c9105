// Contended one-key tryAcquireLock against (a) and (e), and the handoff from
// a release to the next waiter against raw NOTIFY delivery.
#include <dlm/dlm.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

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

namespace {

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

}  // namespace

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

}  // namespace dlm_bench::pg
