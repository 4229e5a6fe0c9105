// Statements and transactions per acquire and per release, counted by the
// server.
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

}  // namespace

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

}  // namespace dlm_bench::pg
