// The cost workloads: per operation, the server CPU (the backends that
// served the workload, from /proc, plus the WAL writer and WAL senders),
// WAL flushes and client CPU, and the rate, of dlm against the baselines,
// interleaved in rounds (the order alternating), medians of the rounds.
//
// One slice = one variant once: fresh connections (a fresh manager), the
// warm-up, the metered window (CPU read at its two edges while every
// connection is still open), then the connections close. WAL flushes are
// the difference of pg_stat_wal.wal_sync from before the slice connects to
// after its backends have exited (a backend reports its counts when it
// exits at the latest), divided by every operation of the slice.
#include "pg_cost.h"

#include <dlm/dlm.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pg_baselines.h"
#include "pg_batch_floor.h"
#include "pg_batch_threads.h"
#include "pg_shedlock.h"
#include "pg_skeleton.h"

namespace dlm_bench::pg {

namespace {

// What one variant sets up for a slice.
struct CostSetup {
  std::function<Operation(int t)> worker;
  std::function<void()> close;  // after the run (destroys managers)
  // Counts what the slice's operations are when they are not the worker's
  // operations (keep-alive: renewals); read at the window's edges.
  std::function<double()> counter;
  int tag = -1;  // count only operations of this tag (-1: all)
};

// appPrefix: the application_name prefix of this slice's dlm connections.
using CostVariantFactory = std::function<CostSetup(const std::string& app)>;

struct CostVariant {
  std::string name;
  CostVariantFactory make;
};

struct SliceCost {
  double opsPerSec = 0;
  double serverUs = 0;  // per op: backends + shared
  double sharedUs = 0;  // per op: walwriter / walsenders
  double walSync = 0;   // per op
  double clientUs = 0;  // per op
  double ops = 0;
  int backends = 0;
  int lost = 0;
};

int gSlice = 0;

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

SliceCost meteredSlice(const Ctx& ctx, ServerMeter& meter, int threads,
                       const CostVariant& variant, double seconds = -1) {
  const Flags& f = ctx.flags;
  const std::string app = fmt::format("bcost{}x", gSlice++);
  const double wal0 = meter.walSync();
  BackendRegistry& registry = BackendRegistry::global();
  registry.start();
  CostSetup s = variant.make(app);
  auto pidsNow = [&] {
    std::vector<int> pids = registry.pids();
    for (int p : backendsByApplication(ctx.admin, app)) pids.push_back(p);
    return pids;
  };
  CostSnapshot begin, end;
  std::vector<int> endPids;
  double counted0 = 0, counted1 = 0;
  WindowHooks hooks;
  hooks.atBegin = [&] {
    begin = meter.take(pidsNow());
    if (s.counter) counted0 = s.counter();
  };
  hooks.atEnd = [&] {
    endPids = pidsNow();
    end = meter.take(endPids);
    if (s.counter) counted1 = s.counter();
  };
  RunStats st;
  try {
    st = timedRun(threads, seconds > 0 ? seconds : f.costSeconds, f.warmup,
                  s.worker, hooks);
  } catch (...) {
    registry.stop();
    if (s.close) s.close();
    throw;
  }
  if (s.close) s.close();
  registry.stop();
  for (int p : registry.pids()) endPids.push_back(p);
  ServerMeter::waitGone(endPids);
  const double wal1 = meter.walSync();

  const WindowCost w = ServerMeter::diff(begin, end);
  double ops;
  double allOps;
  if (s.counter) {
    ops = counted1 - counted0;
    allOps = ops;  // WAL per renewal: the window's share is not separable
  } else if (s.tag >= 0) {
    ops = static_cast<double>(st.endedByTag[s.tag]);
    allOps = static_cast<double>(st.byTag[s.tag]) *
             (static_cast<double>(st.allOps) / std::max<double>(1, st.ops));
  } else {
    ops = static_cast<double>(st.endedInWindow);
    allOps = static_cast<double>(st.allOps);
  }
  SliceCost c;
  c.ops = ops;
  c.backends = w.backends;
  c.lost = w.lostBackends;
  if (ops <= 0 || w.seconds <= 0) return c;
  c.opsPerSec = ops / w.seconds;
  c.serverUs = w.serverUs() / ops;
  c.sharedUs = w.sharedUs / ops;
  c.clientUs = w.clientUs / ops;
  c.walSync = s.counter ? -1 : (wal1 - wal0) / std::max(1.0, allOps);
  return c;
}

// The medians of each variant's rounds.
struct CostSummary {
  std::string name;
  SliceCost median;
  std::vector<SliceCost> rounds;
};

SliceCost medianOf(const std::vector<SliceCost>& rounds) {
  auto pick = [&](double SliceCost::*field) {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(r.*field);
    return median(v);
  };
  SliceCost m;
  m.opsPerSec = pick(&SliceCost::opsPerSec);
  m.serverUs = pick(&SliceCost::serverUs);
  m.sharedUs = pick(&SliceCost::sharedUs);
  m.walSync = pick(&SliceCost::walSync);
  m.clientUs = pick(&SliceCost::clientUs);
  m.ops = pick(&SliceCost::ops);
  for (const auto& r : rounds) {
    m.backends = std::max(m.backends, r.backends);
    m.lost += r.lost;
  }
  return m;
}

// Runs the variants in ctx.flags.costRounds rounds (forward, then backward,
// ...), each slice with the same `run`.
std::vector<CostSummary> interleavedCost(
    const Ctx& ctx, const std::vector<CostVariant>& variants,
    const std::function<SliceCost(const CostVariant&)>& run) {
  std::vector<CostSummary> out(variants.size());
  const int n = static_cast<int>(variants.size());
  for (int r = 0; r < ctx.flags.costRounds; ++r) {
    for (int i = 0; i < n; ++i) {
      const int v = r % 2 == 0 ? i : n - 1 - i;
      out[v].name = variants[v].name;
      out[v].rounds.push_back(run(variants[v]));
    }
  }
  for (auto& s : out) s.median = medianOf(s.rounds);
  return out;
}

std::string roundsText(const CostSummary& s) {
  std::string rates, cpu;
  for (const auto& r : s.rounds) {
    rates += (rates.empty() ? "" : " ") + fmt::format("{:.0f}", r.opsPerSec);
    cpu += (cpu.empty() ? "" : " ") + fmt::format("{:.0f}", r.serverUs);
  }
  return fmt::format("rounds: {} /s; server {} us", rates, cpu);
}

// Adds one result per variant; the first variant's line carries the ratios
// to the variant named `peer` (rate and server CPU per op).
void reportCost(const Ctx& ctx, const std::string& workload,
                const std::string& config, const std::string& condition,
                const std::string& opName, const std::string& what,
                const std::vector<CostSummary>& all,
                const std::string& peer) {
  const CostSummary* p = nullptr;
  for (const auto& s : all) {
    if (s.name == peer) p = &s;
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    const CostSummary& s = all[i];
    const SliceCost& m = s.median;
    Result r;
    r.workload = "cost." + workload + (s.name == "dlm" ? "" : "." + s.name);
    r.store = "postgres";
    r.config = config + " [" + condition + "]";
    r.opsPerSec = m.opsPerSec;
    r.extra = fmt::format(
        "{}; per {}: server CPU {:.1f} us (of it WAL writer/sender {:.1f}), "
        "WAL flushes {}, client CPU {:.1f} us; {} backends; {}{}",
        what, opName, m.serverUs, m.sharedUs,
        m.walSync < 0 ? std::string("n/a") : fmt::format("{:.2f}", m.walSync),
        m.clientUs, m.backends, roundsText(s),
        m.lost ? fmt::format("; {} backends exited in a window", m.lost) : "");
    r.numbers["server_us_per_op"] = m.serverUs;
    r.numbers["shared_us_per_op"] = m.sharedUs;
    r.numbers["wal_sync_per_op"] = m.walSync;
    r.numbers["client_cpu_us_per_op"] = m.clientUs;
    r.numbers["ops_per_round"] = m.ops;
    if (p != nullptr && &s != p && p->median.opsPerSec > 0 &&
        p->median.serverUs > 0) {
      const double rate = m.opsPerSec / p->median.opsPerSec;
      const double cpu = m.serverUs / p->median.serverUs;
      r.ratio = fmt::format("{:.2f}x {} rate, server CPU {:.2f}x {}", rate,
                            peer, cpu, peer);
      r.numbers["ratio_" + peer] = rate;
      r.numbers["server_ratio_" + peer] = cpu;
    }
    ctx.report.add(r);
  }
}

dlm::LockConfiguration costConfiguration(const Flags& f) {
  return cycleConfiguration(f);
}

// A dlm manager for one slice, connected under `app`.
std::shared_ptr<dlm::DistributedLockManager> sliceManager(
    const Ctx& ctx, std::size_t pool, const std::string& app,
    const dlm::LockConfiguration& config) {
  std::shared_ptr<dlm::DistributedLockManager> m = makeManager(
      ctx.conninfo, pool, "lib", config, false, "", false, nullptr, app);
  return m;
}

// The uncontended cycle's variants: dlm (one manager, a pool of `threads`),
// (e), (f), (a), each raw thread on its own connection.
std::vector<CostVariant> cycleVariants(const Ctx& ctx, int threads,
                                       bool depth8) {
  std::vector<CostVariant> v;
  v.push_back({"dlm", [&ctx, threads](const std::string& app) {
                 auto m = sliceManager(ctx, threads, app,
                                       costConfiguration(ctx.flags));
                 CostSetup s;
                 s.worker = [&ctx, m](int t) {
                   return cycleWorker(ctx, 0, t, ctx.conninfo, m.get());
                 };
                 s.close = [m] { m->destroy(); };
                 return s;
               }});
  const std::pair<const char*, int> raw[] = {{"e", 5}, {"f", 6}, {"a", 1}};
  for (const auto& [name, index] : raw) {
    const int variant = index;
    v.push_back({name, [&ctx, variant](const std::string&) {
                   CostSetup s;
                   s.worker = [&ctx, variant](int t) {
                     return cycleWorker(ctx, variant, t, ctx.conninfo,
                                        nullptr);
                   };
                   return s;
                 }});
  }
  if (threads > 1) {
    // The floor of the batched protocol at this thread count (see
    // pg_batch_threads.h).
    v.push_back({"g", [&ctx](const std::string&) {
                   auto g = std::make_shared<ThreadedBatchSkeleton>(
                       ctx.conninfo);
                   CostSetup s;
                   s.worker = [&ctx, g](int t) -> Operation {
                     auto i = std::make_shared<int>(0);
                     auto rng = std::make_shared<std::mt19937_64>(
                         9600 + static_cast<unsigned>(t));
                     const int keys = ctx.flags.keys;
                     const int ttl = ctx.flags.ttlMs;
                     return [g, t, i, rng, keys, ttl]() {
                       g->cycle(key("rawg", fmt::format("c{}k{}", t,
                                                         (*i)++ % keys)),
                                randomHex(*rng, 32), ttl);
                       return 0;
                     };
                   };
                   s.close = [g] { g->close(); };
                   return s;
                 }});
  }
  if (depth8) {
    v.push_back({"dlm_depth8", [&ctx](const std::string& app) {
                   auto m = sliceManager(ctx, 1, app,
                                         costConfiguration(ctx.flags));
                   CostSetup s;
                   s.worker = [m](int) -> Operation {
                     auto i = std::make_shared<int>(0);
                     dlm::DistributedLockManager* mm = m.get();
                     return [mm, i]() {
                       dlm::Lock lock = mm->getLockInstance(
                           fmt::format("d8.a.b.c.d.e.f.k{}", (*i)++ % 64),
                           dlm::LockLevel::DC);
                       mm->tryAcquireLock(lock);
                       if (!mm->releaseLock(lock)) {
                         throw std::runtime_error("depth 8: not released");
                       }
                       return 0;
                     };
                   };
                   s.close = [m] { m->destroy(); };
                   return s;
                 }});
  }
  return v;
}

void costCycle(const Ctx& ctx, ServerMeter& meter, const std::string& cond,
               int threads) {
  const auto variants = cycleVariants(ctx, threads, threads == 1);
  const auto all = interleavedCost(ctx, variants, [&](const CostVariant& v) {
    return meteredSlice(ctx, meter, threads, v);
  });
  reportCost(ctx, "cycle", fmt::format("threads={}", threads), cond, "cycle",
             threads > 1 ? "tryAcquireLock+releaseLock, one manager "
                           "(pool = threads); raw variants one connection "
                           "per thread"
                         : "tryAcquireLock+releaseLock",
             all, "e");
}

// --- 4 processes x 4 threads -------------------------------------------------

struct Child {
  pid_t pid = -1;
  FILE* in = nullptr;   // its stdin
  FILE* out = nullptr;  // its stdout
};

std::string readLine(FILE* f) {
  char buf[8192];
  if (std::fgets(buf, sizeof buf, f) == nullptr) {
    throw std::runtime_error("cost child: no answer");
  }
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t j = s.find(' ', i);
    const std::size_t e = j == std::string::npos ? s.size() : j;
    if (e > i) out.push_back(s.substr(i, e - i));
    i = e + 1;
  }
  return out;
}

Child spawnChild(const Flags& f, const std::string& variant,
                 const std::string& app, int index, int threads) {
  int toChild[2], fromChild[2];
  if (pipe(toChild) != 0 || pipe(fromChild) != 0) {
    throw std::runtime_error("cost: pipe failed");
  }
  std::vector<std::string> args = {
      "dlm_bench",
      "--child=cycle",
      "--child_variant=" + variant,
      "--child_app=" + app,
      fmt::format("--child_index={}", index),
      fmt::format("--threads={}", threads),
      fmt::format("--keys={}", f.keys),
      "--db_name=" + f.dbName,
  };
  if (!f.pgConnection.empty()) args.push_back("--pg=" + f.pgConnection);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("cost: fork failed");
  if (pid == 0) {
    dup2(toChild[0], 0);
    dup2(fromChild[1], 1);
    close(toChild[0]);
    close(toChild[1]);
    close(fromChild[0]);
    close(fromChild[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(toChild[0]);
  close(fromChild[1]);
  Child c;
  c.pid = pid;
  c.in = fdopen(toChild[1], "w");
  c.out = fdopen(fromChild[0], "r");
  return c;
}

SliceCost procsSlice(const Ctx& ctx, ServerMeter& meter, int procs,
                     int threads, const std::string& variant) {
  const Flags& f = ctx.flags;
  const std::string app = fmt::format("bcost{}x", gSlice++);
  const double wal0 = meter.walSync();
  std::vector<Child> children;
  std::vector<int> childPids;  // the backends they report
  auto reap = [&] {
    for (auto& c : children) {
      if (c.in) std::fclose(c.in);
      if (c.out) std::fclose(c.out);
      int status = 0;
      waitpid(c.pid, &status, 0);
    }
    children.clear();
  };
  try {
    for (int i = 0; i < procs; ++i) {
      children.push_back(
          spawnChild(f, variant, fmt::format("{}p{}", app, i), i, threads));
    }
    for (auto& c : children) {
      const auto w = words(readLine(c.out));
      if (w.empty() || w[0] != "ready") {
        throw std::runtime_error("cost child: expected ready");
      }
      for (std::size_t i = 1; i < w.size(); ++i) {
        childPids.push_back(std::stoi(w[i]));
      }
    }
    const std::int64_t b =
        nowNs() + static_cast<std::int64_t>(f.warmup * 1e9) + 20000000;
    const std::int64_t e = b + static_cast<std::int64_t>(f.costSeconds * 1e9);
    for (auto& c : children) {
      std::fprintf(c.in, "go %lld %lld\n", static_cast<long long>(b),
                   static_cast<long long>(e));
      std::fflush(c.in);
    }
    auto pidsNow = [&] {
      std::vector<int> pids = childPids;
      for (int p : backendsByApplication(ctx.admin, app)) pids.push_back(p);
      return pids;
    };
    while (nowNs() < b) std::this_thread::sleep_for(std::chrono::microseconds(500));
    const CostSnapshot begin = meter.take(pidsNow());
    while (nowNs() < e) std::this_thread::sleep_for(std::chrono::microseconds(500));
    const std::vector<int> endPids = pidsNow();
    const CostSnapshot end = meter.take(endPids);
    for (auto& c : children) {
      std::fprintf(c.in, "ok\n");
      std::fflush(c.in);
    }
    double ops = 0, allOps = 0, clientUs = 0;
    for (auto& c : children) {
      const auto w = words(readLine(c.out));
      if (w.size() < 4 || w[0] != "done") {
        throw std::runtime_error("cost child: expected done");
      }
      ops += std::stod(w[1]);
      allOps += std::stod(w[2]);
      clientUs += std::stod(w[3]);
    }
    reap();
    ServerMeter::waitGone(endPids);
    const double wal1 = meter.walSync();
    const WindowCost wc = ServerMeter::diff(begin, end);
    SliceCost c;
    c.ops = ops;
    c.backends = wc.backends;
    c.lost = wc.lostBackends;
    if (ops <= 0) return c;
    c.opsPerSec = ops / wc.seconds;
    c.serverUs = wc.serverUs() / ops;
    c.sharedUs = wc.sharedUs / ops;
    c.clientUs = clientUs / ops;  // the children's own CPU in the window
    c.walSync = (wal1 - wal0) / std::max(1.0, allOps);
    return c;
  } catch (...) {
    for (auto& c : children) kill(c.pid, SIGTERM);
    reap();
    throw;
  }
}

void costProcs(const Ctx& ctx, ServerMeter& meter, const std::string& cond) {
  const int procs = 4, threads = 4;
  std::vector<CostVariant> variants;
  for (const char* name : {"dlm", "e", "f", "a"}) {
    variants.push_back({name, CostVariantFactory()});
  }
  const auto all = interleavedCost(ctx, variants, [&](const CostVariant& v) {
    return procsSlice(ctx, meter, procs, threads, v.name);
  });
  reportCost(ctx, "procs", fmt::format("procs={} threads={}", procs, threads),
             cond, "cycle",
             "tryAcquireLock+releaseLock; fork/exec'd processes, one manager "
             "each (pool 4); rate summed; client CPU of the children",
             all, "e");
}

// --- contended one key --------------------------------------------------------

void costContended(const Ctx& ctx, ServerMeter& meter, const std::string& cond) {
  const int threads = 4;
  const int ttl = ctx.flags.ttlMs;
  std::vector<CostVariant> v;
  v.push_back({"dlm", [&ctx, threads](const std::string& app) {
                 auto m = sliceManager(ctx, threads, app,
                                       costConfiguration(ctx.flags));
                 CostSetup s;
                 s.tag = 0;
                 s.worker = [m](int) -> Operation {
                   auto lock = std::make_shared<dlm::Lock>(
                       m->getLockInstance("contended", dlm::LockLevel::DC));
                   dlm::DistributedLockManager* mm = m.get();
                   return [mm, lock]() {
                     try {
                       mm->tryAcquireLock(*lock);
                     } catch (const dlm::DLMException& e) {
                       if (e.code() != dlm::ErrorCode::LOCK_UNAVAILABLE) throw;
                       return 1;
                     }
                     mm->releaseLock(*lock);
                     return 0;
                   };
                 };
                 s.close = [m] { m->destroy(); };
                 return s;
               }});
  v.push_back({"e", [&ctx, ttl](const std::string&) {
                 CostSetup s;
                 s.tag = 0;
                 s.worker = [&ctx, ttl](int t) -> Operation {
                   auto e = std::make_shared<RawShedLock>(ctx.conninfo,
                                                          9200 + t);
                   return [e, ttl]() {
                     if (!e->lock("contended", ttl)) return 1;
                     e->unlock("contended");
                     return 0;
                   };
                 };
                 return s;
               }});
  v.push_back({"a", [&ctx, ttl](const std::string&) {
                 CostSetup s;
                 s.tag = 0;
                 s.worker = [&ctx, ttl](int t) -> Operation {
                   auto c = std::make_shared<RawFunctions>(ctx.conninfo,
                                                           9000 + t);
                   const std::string k = key("rawa", "contended");
                   return [c, k, ttl]() {
                     if (!c->acquire(k, ttl)) return 1;
                     c->release(k);
                     return 0;
                   };
                 };
                 return s;
               }});
  // (f): the one-call skeleton on one key, the floor of the contended rate.
  v.push_back({"f", [&ctx, ttl](const std::string&) {
                 CostSetup s;
                 s.tag = 0;
                 s.worker = [&ctx, ttl](int t) -> Operation {
                   auto f = std::make_shared<RawSkeleton>(ctx.conninfo,
                                                          9300 + t);
                   const std::string k = key("rawf", "contended");
                   f->ensureRow(k);
                   return [f, k, ttl]() {
                     if (!f->acquire(k, ttl)) return 1;
                     f->release(k);
                     return 0;
                   };
                 };
                 return s;
               }});
  const auto all = interleavedCost(ctx, v, [&](const CostVariant& x) {
    return meteredSlice(ctx, meter, threads, x);
  });
  reportCost(ctx, "contended", "threads=4 one key", cond, "acquisition",
             "tryAcquireLock (+ releaseLock when acquired) on one key; rate "
             "and cost per acquisition",
             all, "e");
}

// --- extend, keep-alive --------------------------------------------------------

void costExtend(const Ctx& ctx, ServerMeter& meter, const std::string& cond) {
  const int ttl = ctx.flags.ttlMs;
  std::vector<CostVariant> v;
  v.push_back({"dlm", [&ctx](const std::string& app) {
                 auto m = sliceManager(ctx, 1, app,
                                       costConfiguration(ctx.flags));
                 CostSetup s;
                 s.worker = [m](int) -> Operation {
                   auto lock = std::make_shared<dlm::Lock>(
                       m->getLockInstance("extend", dlm::LockLevel::DC));
                   m->tryAcquireLock(*lock);
                   dlm::DistributedLockManager* mm = m.get();
                   auto release = std::shared_ptr<void>(nullptr, [mm, lock](void*) {
                     try {
                       mm->releaseLock(*lock);
                     } catch (const std::exception&) {
                     }
                   });
                   return [mm, lock, release]() {
                     mm->extendLock(*lock);
                     return 0;
                   };
                 };
                 s.close = [m] { m->destroy(); };
                 return s;
               }});
  v.push_back({"e", [&ctx, ttl](const std::string&) {
                 CostSetup s;
                 s.worker = [&ctx, ttl](int) -> Operation {
                   auto e = std::make_shared<RawShedLock>(ctx.conninfo, 9500);
                   if (!e->lock("extend", ttl)) {
                     throw std::runtime_error("e: extend row held");
                   }
                   auto release = std::shared_ptr<void>(nullptr, [e](void*) {
                     try {
                       e->unlock("extend");
                     } catch (const std::exception&) {
                     }
                   });
                   return [e, ttl, release]() {
                     if (!e->extend("extend", ttl)) {
                       throw std::runtime_error("e: not extended");
                     }
                     return 0;
                   };
                 };
                 return s;
               }});
  // (f)'s extend: the floor of an extend made through a SECURITY DEFINER
  // function (least privilege), one statement.
  v.push_back({"f", [&ctx, ttl](const std::string&) {
                 CostSetup s;
                 s.worker = [&ctx, ttl](int) -> Operation {
                   auto f = std::make_shared<RawSkeleton>(ctx.conninfo, 9501);
                   const std::string k = key("rawf", "extend");
                   f->ensureRow(k);
                   if (!f->acquire(k, ttl)) {
                     throw std::runtime_error("f: extend row held");
                   }
                   auto release = std::shared_ptr<void>(nullptr, [f, k](void*) {
                     try {
                       f->release(k);
                     } catch (const std::exception&) {
                     }
                   });
                   return [f, k, ttl, release]() {
                     f->extend(k, ttl);
                     return 0;
                   };
                 };
                 return s;
               }});
  const auto all = interleavedCost(ctx, v, [&](const CostVariant& x) {
    return meteredSlice(ctx, meter, 1, x);
  });
  reportCost(ctx, "extend", "threads=1 held lock", cond, "extend",
             "extendLock of a held lock; (e): its conditional extend UPDATE; "
             "(f): one SECURITY DEFINER function running that UPDATE",
             all, "e");
}

void costKeepAlive(const Ctx& ctx, ServerMeter& meter,
                   const std::string& cond) {
  const int n = ctx.flags.keepaliveLocks;
  // Renewed every third of the TTL: 3 s gives a round a second.
  const auto ttl = std::chrono::milliseconds(3000);
  std::vector<CostVariant> v;
  v.push_back({"dlm", [&ctx, n, ttl](const std::string& app) {
                 dlm::LockConfiguration c = costConfiguration(ctx.flags);
                 c.lockTtl = ttl;
                 auto m = sliceManager(ctx, 2, app, c);
                 auto guards = std::make_shared<std::vector<dlm::LockGuard>>();
                 guards->reserve(static_cast<std::size_t>(n));
                 for (int i = 0; i < n; ++i) {
                   dlm::Lock lock = m->getLockInstance(
                       fmt::format("ka{}", i), dlm::LockLevel::DC);
                   m->tryAcquireLock(lock, ttl);
                   guards->emplace_back(*m, std::move(lock));
                 }
                 CostSetup s;
                 // The window's operations are the keep-alive's renewals;
                 // the bench's one thread only waits.
                 s.worker = [](int) -> Operation {
                   return [] {
                     std::this_thread::sleep_for(std::chrono::milliseconds(20));
                     return -1;
                   };
                 };
                 s.counter = [m] {
                   return static_cast<double>(m->metrics().renewals);
                 };
                 s.close = [m, guards] {
                   guards->clear();
                   m->destroy();
                 };
                 return s;
               }});
  v.push_back({"e_extend", [&ctx, n](const std::string&) {
                 CostSetup s;
                 s.worker = [&ctx, n](int) -> Operation {
                   const int ttlMs = 60000;
                   auto e = std::make_shared<RawShedLock>(ctx.conninfo, 9600);
                   for (int i = 0; i < n; ++i) {
                     if (!e->lock(fmt::format("ka{}", i), ttlMs)) {
                       throw std::runtime_error("e: keep-alive row held");
                     }
                   }
                   auto release = std::shared_ptr<void>(nullptr, [e, n](void*) {
                     try {
                       for (int i = 0; i < n; ++i) e->unlock(fmt::format("ka{}", i));
                     } catch (const std::exception&) {
                     }
                   });
                   auto i = std::make_shared<int>(0);
                   return [e, i, n, ttlMs, release]() {
                     const std::string name = fmt::format("ka{}", (*i)++ % n);
                     if (!e->extend(name, ttlMs)) {
                       throw std::runtime_error("e: not extended " + name);
                     }
                     return 0;
                   };
                 };
                 return s;
               }});
  // A few renewal rounds per window.
  const double seconds = std::max(3.0, ctx.flags.costSeconds);
  const auto all = interleavedCost(ctx, v, [&](const CostVariant& x) {
    return meteredSlice(ctx, meter, 1, x, seconds);
  });
  reportCost(ctx, "keepalive", fmt::format("locks={}", n), cond,
             "renewed lease",
             fmt::format("dlm: {} LockGuards of one manager (TTL 3 s, "
                         "renewed every 1 s; count: metrics().renewals), the "
                         "rate is renewals/s; e_extend: (e)'s extend UPDATE on "
                         "{} held rows in turn, one connection",
                         n, n),
             all, "e_extend");
}

// --- tryAcquireAll of 10 keys --------------------------------------------------

void costAcquireAll(const Ctx& ctx, ServerMeter& meter,
                    const std::string& cond) {
#ifdef DLM_BENCH_ACQUIRE_ALL
  const int keys = 10;
  std::vector<CostVariant> v;
  v.push_back({"dlm", [&ctx, keys](const std::string& app) {
                 auto m = sliceManager(ctx, 1, app,
                                       costConfiguration(ctx.flags));
                 CostSetup s;
                 s.worker = [m, keys](int) -> Operation {
                   auto round = std::make_shared<int>(0);
                   dlm::DistributedLockManager* mm = m.get();
                   return [mm, round, keys]() {
                     std::vector<dlm::Lock> locks;
                     locks.reserve(keys);
                     const int base = (*round)++ % 100;
                     for (int k = 0; k < keys; ++k) {
                       locks.push_back(mm->getLockInstance(
                           fmt::format("all{}k{}", base, k),
                           dlm::LockLevel::DC));
                     }
                     std::vector<dlm::Lock*> ptrs;
                     for (auto& l : locks) ptrs.push_back(&l);
                     mm->tryAcquireAll(ptrs);
                     if (mm->releaseAll(ptrs) != ptrs.size()) {
                       throw std::runtime_error("releaseAll: not all freed");
                     }
                     return 0;
                   };
                 };
                 s.close = [m] { m->destroy(); };
                 return s;
               }});
  v.push_back({"one", [&ctx](const std::string& app) {
                 auto m = sliceManager(ctx, 1, app,
                                       costConfiguration(ctx.flags));
                 CostSetup s;
                 s.worker = [&ctx, m](int) {
                   return cycleWorker(ctx, 0, 0, ctx.conninfo, m.get());
                 };
                 s.close = [m] { m->destroy(); };
                 return s;
               }});
  const auto all = interleavedCost(ctx, v, [&](const CostVariant& x) {
    return meteredSlice(ctx, meter, 1, x);
  });
  reportCost(ctx, "acquire_all", "keys=10 threads=1", cond, "call",
             "tryAcquireAll of 10 keys + releaseAll, against one key's "
             "tryAcquireLock + releaseLock (variant one)",
             all, "one");
#else
  (void)meter;
  Result r;
  r.workload = "cost.acquire_all";
  r.store = "postgres";
  r.config = "keys=10 threads=1 [" + cond + "]";
  r.extra =
      "not run: this library has no DistributedLockManager::tryAcquireAll "
      "definition (detected at configure time)";
  ctx.report.add(r);
#endif
}

// --- the floor of the batched protocol: (g) against dlm's batch functions ---

// Rows per variant (a multiple of the largest batch); each call takes a
// block of consecutive keys, chosen at random.
constexpr int kFloorPool = 1024;
constexpr int kFloorSizes[] = {1, 4, 16, 64};

std::vector<std::string> floorPoolKeys(const std::string& client) {
  std::vector<std::string> keys;
  keys.reserve(kFloorPool);
  for (int i = 0; i < kFloorPool; ++i) {
    keys.push_back(key(client, fmt::format("b{}", i)));
  }
  return keys;
}

// The rows of (g) ("rawg") and of dlm's batch functions ("rawh"), free;
// the client rawh bound (a batch serves only a bound client: its first
// single call binds it, hierarchy on, as the library's first call would).
void prefillFloorRows(const Ctx& ctx) {
  PgConn c(ctx.conninfo);
  c.exec(fmt::format(
      "INSERT INTO dlm_locks (resource, resource_crc) SELECT "
      "format('DC#{}#%s#b%s', v, i), 0 FROM unnest(ARRAY['rawg', 'rawh']) v, "
      "generate_series(0, {}) i ON CONFLICT DO NOTHING",
      kFarm, kFloorPool - 1));
  RawFunctions bind(ctx.conninfo, 9700);
  const std::string k = key("rawh", "bind");
  if (bind.acquire(k, ctx.flags.ttlMs)) bind.release(k);
  c.exec("VACUUM ANALYZE dlm_locks");
}

// One acquire call of n keys + one release call of them, per operation.
template <typename Raw>
CostVariant floorVariant(const Ctx& ctx, const std::string& name,
                         const std::string& client, int n,
                         std::uint64_t seed) {
  return {name, [&ctx, client, n, seed](const std::string&) {
            CostSetup s;
            s.worker = [&ctx, client, n, seed](int) -> Operation {
              auto raw = std::make_shared<Raw>(ctx.conninfo, seed);
              auto pool = std::make_shared<std::vector<std::string>>(
                  floorPoolKeys(client));
              auto rng = std::make_shared<std::mt19937_64>(seed + 1);
              const int ttl = ctx.flags.ttlMs;
              return [raw, pool, rng, n, ttl]() {
                const auto blocks =
                    static_cast<std::uint64_t>(kFloorPool / n);
                const auto from = static_cast<std::ptrdiff_t>(
                    ((*rng)() % blocks) * static_cast<std::uint64_t>(n));
                const std::vector<std::string> batch(
                    pool->begin() + from, pool->begin() + from + n);
                raw->acquire(batch, ttl);
                raw->release();
                return 0;
              };
            };
            return s;
          }};
}

// Per call (n acquisitions and n releases) to per lock cycle.
void perLockCycle(SliceCost& c, int n) {
  c.opsPerSec *= n;
  c.serverUs /= n;
  c.sharedUs /= n;
  if (c.walSync >= 0) c.walSync /= n;
  c.clientUs /= n;
  c.ops *= n;
}

std::string floorFigures(const SliceCost& m) {
  return fmt::format(
      "server CPU {:.1f} us (of it WAL writer/sender {:.1f}), WAL flushes "
      "{:.3f}, client CPU {:.1f} us",
      m.serverUs, m.sharedUs, m.walSync, m.clientUs);
}

void costFloor(const Ctx& ctx, ServerMeter& meter, const std::string& cond) {
  prefillFloorRows(ctx);
  const double seconds = ctx.flags.floorSeconds;
  // (e)'s cycle of this run (1 thread); measured here when the cost
  // workloads did not run.
  double eUs = -1;
  std::string eWhere = "cost.cycle.e threads=1 of this run";
  if (const Result* e = ctx.report.find("cost.cycle.e",
                                        "threads=1 [" + cond + "]")) {
    eUs = e->numbers.at("server_us_per_op");
  } else {
    std::vector<CostVariant> ev;
    ev.push_back({"e", [&ctx](const std::string&) {
                    CostSetup s;
                    s.worker = [&ctx](int t) {
                      return cycleWorker(ctx, 5, t, ctx.conninfo, nullptr);
                    };
                    return s;
                  }});
    const auto all = interleavedCost(ctx, ev, [&](const CostVariant& v) {
      return meteredSlice(ctx, meter, 1, v, seconds);
    });
    reportCost(ctx, "floor", "threads=1", cond, "cycle",
               "(e) ShedLock's statements, raw libpq, one connection: the "
               "reference of the floor lines",
               all, "");
    eUs = all[0].median.serverUs;
    eWhere = "cost.floor.e threads=1, measured beside the floor";
  }
  const std::string group =
      "The floor of the batched protocol on this machine [" + cond + "]";
  ctx.report.addNote(
      group,
      fmt::format(
          "(g) is the batched protocol's skeleton: two SECURITY DEFINER "
          "PL/pgSQL functions (pinned search_path); acquire = one SELECT .. "
          "WHERE resource = ANY($1) ORDER BY resource FOR UPDATE SKIP LOCKED "
          "+ one UPDATE .. FROM unnest(..) granting free or expired rows, "
          "durable; release = one UPDATE .. FROM unnest(..), lazy "
          "(synchronous_commit off); no tenancy, limits or hierarchy. dlm = "
          "dlm_try_acquire_each + dlm_release_each called raw the same way "
          "(prepared, autocommit, generic plans, the store's statements). "
          "One connection, n keys per call; figures per lock cycle (an "
          "acquisition and its release), median of {} rounds of {} s. (g) is "
          "the floor: what the batched protocol's shape (least privilege, "
          "set-based statements, row locks in key order, durable acquire, "
          "lazy release) costs on this machine before any of dlm's checks; "
          "a target below it cannot be met by checking less. (e) = {:.1f} "
          "us server CPU per cycle ({}).",
          ctx.flags.costRounds, seconds, eUs, eWhere));
  for (const int n : kFloorSizes) {
    std::vector<CostVariant> v;
    v.push_back(floorVariant<RawBatchSkeleton>(ctx, "g", "rawg", n,
                                               9800 + static_cast<unsigned>(n)));
    v.push_back(floorVariant<RawBatchEach>(ctx, "dlm_each", "rawh", n,
                                           9900 + static_cast<unsigned>(n)));
    auto all = interleavedCost(ctx, v, [&](const CostVariant& x) {
      return meteredSlice(ctx, meter, 1, x, seconds);
    });
    for (auto& s : all) {
      for (auto& r : s.rounds) perLockCycle(r, n);
      s.median = medianOf(s.rounds);
    }
    const SliceCost& g = all[0].median;
    const SliceCost& d = all[1].median;
    const std::string config =
        fmt::format("keys={} per call threads=1 [{}]", n, cond);
    for (const auto& s : all) {
      const SliceCost& m = s.median;
      const bool isG = s.name == "g";
      Result r;
      r.workload = "cost.floor." + s.name;
      r.store = "postgres";
      r.config = config;
      r.opsPerSec = m.opsPerSec;
      r.extra = fmt::format(
          "{}; per lock cycle: {}; {} backends; {}{}",
          isG ? "(g) batch skeleton: bench_batch_acquire + "
                "bench_batch_release, raw libpq; rate in lock cycles/s"
              : "dlm_try_acquire_each + dlm_release_each, raw libpq; rate "
                "in lock cycles/s",
          floorFigures(m), m.backends, roundsText(s),
          m.lost ? fmt::format("; {} backends exited in a window", m.lost)
                 : "");
      r.numbers["keys_per_call"] = n;
      r.numbers["server_us_per_op"] = m.serverUs;
      r.numbers["shared_us_per_op"] = m.sharedUs;
      r.numbers["wal_sync_per_op"] = m.walSync;
      r.numbers["client_cpu_us_per_op"] = m.clientUs;
      if (eUs > 0) {
        r.numbers["server_ratio_e"] = m.serverUs / eUs;
      }
      if (isG) {
        r.ratio = fmt::format("server CPU {:.2f}x e", m.serverUs / eUs);
      } else if (g.serverUs > 0 && g.opsPerSec > 0) {
        r.ratio = fmt::format(
            "server CPU {:.2f}x g, {:.2f}x e; rate {:.2f}x g",
            m.serverUs / g.serverUs, m.serverUs / eUs,
            m.opsPerSec / g.opsPerSec);
        r.numbers["server_ratio_g"] = m.serverUs / g.serverUs;
        r.numbers["client_ratio_g"] = m.clientUs / g.clientUs;
        r.numbers["ratio_g"] = m.opsPerSec / g.opsPerSec;
      }
      ctx.report.add(r);
    }
    ctx.report.addNote(
        group,
        fmt::format(
            "{} key{} per call: (g) {:.1f} us server CPU per lock cycle, "
            "{:.3f} WAL flushes, {:.1f} us client CPU, {:.0f} cycles/s; dlm "
            "{:.1f} us, {:.3f}, {:.1f} us, {:.0f} cycles/s. dlm / (g): "
            "server CPU {:.2f}x, client CPU {:.2f}x. Against (e)'s {:.1f} us "
            "per cycle: (g) {:.2f}x, dlm {:.2f}x",
            n, n == 1 ? "" : "s", g.serverUs, g.walSync, g.clientUs,
            g.opsPerSec, d.serverUs, d.walSync, d.clientUs, d.opsPerSec,
            g.serverUs > 0 ? d.serverUs / g.serverUs : -1,
            g.clientUs > 0 ? d.clientUs / g.clientUs : -1, eUs,
            eUs > 0 ? g.serverUs / eUs : -1, eUs > 0 ? d.serverUs / eUs : -1));
  }
}

}  // namespace

void runFloor(const Ctx& ctx, ServerMeter& meter,
              const std::string& condition) {
  meter.refreshShared();
  std::cout << fmt::format(
                   "floor [{}]: server CPU = the workload's backends + {}; "
                   "{} rounds of {} s per batch size",
                   condition, meter.sharedDescription(), ctx.flags.costRounds,
                   ctx.flags.floorSeconds)
            << std::endl;
  prefillCycleRows(ctx, 1);
  costFloor(ctx, meter, condition);
}

void runCost(const Ctx& ctx, ServerMeter& meter, const std::string& condition) {
  const Flags& f = ctx.flags;
  meter.refreshShared();
  std::cout << fmt::format(
                   "cost [{}]: server CPU = the workload's backends + {}; "
                   "{} rounds of {} s",
                   condition, meter.sharedDescription(), f.costRounds,
                   f.costSeconds)
            << std::endl;
  int maxThreads = 16;
  for (int t : f.threads) maxThreads = std::max(maxThreads, t);
  prefillCycleRows(ctx, maxThreads);
  {
    // (e)'s rows for the keep-alive workload.
    PgConn c(ctx.conninfo);
    c.exec(fmt::format(
        "INSERT INTO {} SELECT format('ka%s', i), now() - interval '1 hour', "
        "now() - interval '1 hour', 'nobody' FROM generate_series(0, {}) i ON "
        "CONFLICT DO NOTHING",
        kShedLockTable, f.keepaliveLocks - 1));
  }
  for (int threads : f.threads) costCycle(ctx, meter, condition, threads);
  costProcs(ctx, meter, condition);
  costContended(ctx, meter, condition);
  costExtend(ctx, meter, condition);
  costKeepAlive(ctx, meter, condition);
  costAcquireAll(ctx, meter, condition);
  if (f.wants("floor")) costFloor(ctx, meter, condition);
}

}  // namespace dlm_bench::pg

namespace dlm_bench {

int runCostChild(const Flags& f) {
  using namespace pg;
  PgConn admin(f.pgConnection);
  Report report;
  Ctx ctx{f,
          report,
          withDatabase(f.pgConnection, f.dbName),
          withDatabase(f.pgConnection, f.dbName + "_rt"),
          f.dbName + "_rt",
          admin};
  const int threads = f.threads.empty() ? 4 : f.threads[0];
  const int offset = f.childIndex * threads;  // distinct keys per process
  BackendRegistry& registry = BackendRegistry::global();
  std::shared_ptr<dlm::DistributedLockManager> m;
  int variant = 0;
  if (f.childVariant == "dlm") {
    m = makeManager(ctx.conninfo, static_cast<std::size_t>(threads), "lib",
                    cycleConfiguration(f), false, "", false, nullptr,
                    f.childApp);
  } else if (f.childVariant == "e") {
    variant = 5;
  } else if (f.childVariant == "f") {
    variant = 6;
  } else if (f.childVariant == "a") {
    variant = 1;
  } else {
    std::cerr << "dlm_bench: unknown --child_variant\n";
    return 2;
  }
  registry.start();
  double cpu0 = 0, cpu1 = 0;
  WindowHooks hooks;
  hooks.schedule = [&] {
    std::string line = "ready";
    for (int p : registry.pids()) line += fmt::format(" {}", p);
    std::cout << line << std::endl;
    std::string go;
    long long b = 0, e = 0;
    std::cin >> go >> b >> e;
    if (go != "go") throw std::runtime_error("child: expected go");
    return std::make_pair(static_cast<std::int64_t>(b),
                          static_cast<std::int64_t>(e));
  };
  hooks.atBegin = [&] { cpu0 = selfCpuUs(); };
  hooks.atEnd = [&] {
    cpu1 = selfCpuUs();
    std::string ok;
    std::cin >> ok;  // the parent has read the backends' CPU
  };
  const RunStats st = timedRun(threads, f.costSeconds, f.warmup, [&](int t) {
    return cycleWorker(ctx, variant, offset + t, ctx.conninfo, m.get());
  }, hooks);
  registry.stop();
  if (m) m->destroy();
  std::cout << fmt::format("done {} {} {:.0f}", st.endedInWindow, st.allOps,
                           cpu1 - cpu0)
            << std::endl;
  return 0;
}

}  // namespace dlm_bench
