#include "bench_util.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

namespace dlm_bench {

std::int64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// --- flags -------------------------------------------------------------------

namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

template <typename T>
std::vector<T> numberList(const std::string& s) {
  std::vector<T> out;
  for (const auto& item : splitList(s)) {
    out.push_back(static_cast<T>(std::stod(item)));
  }
  return out;
}

[[noreturn]] void usage(int rc) {
  std::cerr <<
      R"(dlm_bench: measures dlm's lock paths against raw-SQL baselines in one run.

  --benchmarks=LIST   cost,cycle,roundtrips,handoff,contended,scale,procs,readers,extend,pooler,
                      events,junk,guard
                      (default: all but cycle, contended, extend, which cost replaces)
                      cost        PG: what the server pays per operation, from /proc: CPU
                                  (utime+stime) of the backends that served the workload
                                  plus the WAL writer (and WAL sender), WAL flushes
                                  (pg_stat_wal), client CPU; dlm against (e), (f), (a),
                                  interleaved: cycle at --threads, 4 processes x 4 threads,
                                  contended one key, extend, keep-alive of --keepalive_locks
                                  held locks, tryAcquireAll of 10 keys against one acquire
                      floor       PG, with cost or alone: the floor of the batched protocol,
                                  (g) a two-function PL/pgSQL skeleton of set-based acquire +
                                  release, against dlm_try_acquire_each + dlm_release_each
                                  called raw, 1, 4, 16 and 64 keys per call, one connection;
                                  per lock cycle, metered as cost
                      cycle       uncontended acquire+release, per-thread keys; PG baselines
                                  a (raw dlm_try_acquire/dlm_release), b (client-side BEGIN; SELECT
                                  FOR UPDATE; UPDATE; COMMIT), c (advisory locks),
                                  d (INSERT .. ON CONFLICT + UPDATE), e (ShedLock's steady-state
                                  statements: conditional UPDATE to lock, UPDATE by owner to
                                  unlock); SQLite: raw sqlite3. Then, per variant, server time
                                  per cycle (pg_stat_statements, nested statements with
                                  track = 'all') and WAL flushes per cycle (pg_stat_wal)
                      roundtrips  statements and transactions per acquire / release, from the
                                  server's pg_stat_statements and pg_stat_database (PostgreSQL)
                      handoff     one holder, N waiters in acquireLock on one key: time from just
                                  before releaseLock to the next acquireLock returning
                      contended   N threads tryAcquireLock one key: successes/s, failures/s
                                  (PG: against baselines a and e)
                      extend      PG: extendLock on a held lock against baseline e's extend
                                  statement (1 thread), with server time and WAL per extend
                      scale       cycle p50 with the table pre-filled to --rows, ids of --depths
                      junk        the cycle (1 thread) with 100,000 live requests and
                                  100,000 live SHARED holds on other keys in its database,
                                  against the same cycle in a database without them;
                                  SQLite also the wait path (registerWait+unregisterWait)
                      guard       the application's transaction BEGIN; guardWithin; UPDATE
                                  one row; COMMIT against the same without guardWithin
                                  (PG: 1 and 4 threads, libpqxx; then server time and WAL
                                  flushes/records per transaction; SQLite: 1 thread)
                      procs       SQLite: --procs processes (fork) cycling on one file
                      readers     --readers_threads threads acquireLock / hold / release on
                                  --readers_keys keys, --shared_percent of them SHARED, against
                                  the same workload with every lock EXCLUSIVE: acquisitions/s
  --store=LIST        postgres,sqlite (default: both)
  --threads=LIST      cycle thread counts (default 1,4,16)
  --seconds=S         measured seconds per workload (default 4); --warmup=S (0.25)
  --rounds=N          compared variants run interleaved in N slices (default 4)
  --rows=LIST         scale pre-fill sizes (default 1000,100000,1000000)
  --depths=LIST       scale hierarchy depths (default 1,4,8)
  --waiters=LIST      handoff waiter counts (default 1,4,16)
  --contended_threads=LIST (default 4,16)
  --sleep_ms=N        handoff waiters' sleepBetweenRetries (default 50)
  --hold_ms=N         handoff hold time (default 5)
  --procs=N           SQLite processes (default 4)
  --keys=N            key pool per thread (default 1000)
  --readers_threads=N --readers_keys=N --shared_percent=P --readers_hold_us=N
                      the readers workload (default 8 threads, 4 keys, 90 %, 5000 us)
  --pg=CONNINFO       admin connection (default: libpq PG* variables)
  --pg_after_schema=SQL  run after the migrations in each benchmark schema
                      (to measure a proposed schema change)
  --pg_pooler=CONNINFO  PgBouncer (transaction pooling) in front of the same
                      server: the pooler workload runs the cycle through it
                      (poolerSafe store) against the cycle straight to the
                      server, 1 and 4 threads; without it, pooler is skipped
  --db_name=NAME      database created (dropped first) for the run (default dlm_bench)
  --sqlite_dir=DIR    where SQLite files go (default ./dlm_bench_sqlite; use a real disk)
  --results_dir=DIR   write latest.md, latest.json and plot data there
  --command=TEXT      --note=TEXT   quoted in latest.md
  --cost_seconds=S    cost: the metered window of each slice (default 1.2)
  --cost_rounds=N     cost: interleaved rounds, order alternating (default 3)
  --keepalive_locks=N cost: locks held under keep-alive (default 1000)
  --floor_seconds=S   floor: the metered window of each slice (default 0.6)
  --standby_start=CMD --standby_stop=CMD
                      cost: shell commands that attach / detach a synchronous
                      standby (scripts/pg-standby.sh); the cost workloads then
                      run a second time, in that condition
)";
  std::exit(rc);
}

}  // namespace

bool Flags::wants(const std::string& b) const {
  return std::find(benchmarks.begin(), benchmarks.end(), b) != benchmarks.end();
}
bool Flags::wantsStore(const std::string& s) const {
  return std::find(stores.begin(), stores.end(), s) != stores.end();
}

Flags parseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") usage(0);
    const auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      std::cerr << "dlm_bench: bad argument '" << arg << "'\n";
      usage(2);
    }
    const std::string name = arg.substr(2, eq - 2);
    const std::string v = arg.substr(eq + 1);
    try {
      if (name == "benchmarks") {
        f.benchmarks = splitList(v);
      } else if (name == "store") {
        f.stores = splitList(v);
      } else if (name == "threads") {
        f.threads = numberList<int>(v);
      } else if (name == "seconds") {
        f.seconds = std::stod(v);
      } else if (name == "warmup") {
        f.warmup = std::stod(v);
      } else if (name == "rounds") {
        f.rounds = std::stoi(v);
      } else if (name == "rows") {
        f.rows = numberList<long>(v);
      } else if (name == "depths") {
        f.depths = numberList<int>(v);
      } else if (name == "waiters") {
        f.waiters = numberList<int>(v);
      } else if (name == "contended_threads") {
        f.contendedThreads = numberList<int>(v);
      } else if (name == "sleep_ms") {
        f.sleepMs = std::stoi(v);
      } else if (name == "hold_ms") {
        f.holdMs = std::stoi(v);
      } else if (name == "procs") {
        f.procs = std::stoi(v);
      } else if (name == "keys") {
        f.keys = std::stoi(v);
      } else if (name == "readers_threads") {
        f.readersThreads = std::stoi(v);
      } else if (name == "readers_keys") {
        f.readersKeys = std::stoi(v);
      } else if (name == "shared_percent") {
        f.sharedPercent = std::stoi(v);
      } else if (name == "readers_hold_us") {
        f.readersHoldUs = std::stoi(v);
      } else if (name == "pg") {
        f.pgConnection = v;
      } else if (name == "pg_after_schema") {
        f.pgAfterSchema = v;
      } else if (name == "pg_pooler") {
        f.pgPooler = v;
      } else if (name == "db_name") {
        f.dbName = v;
      } else if (name == "sqlite_dir") {
        f.sqliteDir = v;
      } else if (name == "results_dir") {
        f.resultsDir = v;
      } else if (name == "command") {
        f.command = v;
      } else if (name == "note") {
        f.note = v;
      } else if (name == "cost_seconds") {
        f.costSeconds = std::stod(v);
      } else if (name == "cost_rounds") {
        f.costRounds = std::stoi(v);
      } else if (name == "standby_start") {
        f.standbyStart = v;
      } else if (name == "standby_stop") {
        f.standbyStop = v;
      } else if (name == "keepalive_locks") {
        f.keepaliveLocks = std::stoi(v);
      } else if (name == "floor_seconds") {
        f.floorSeconds = std::stod(v);
      } else if (name == "child") {
        f.child = v;
      } else if (name == "child_variant") {
        f.childVariant = v;
      } else if (name == "child_app") {
        f.childApp = v;
      } else if (name == "child_index") {
        f.childIndex = std::stoi(v);
      } else {
        std::cerr << "dlm_bench: unknown flag --" << name << "\n";
        usage(2);
      }
    } catch (const std::logic_error&) {
      std::cerr << "dlm_bench: bad value for --" << name << ": '" << v << "'\n";
      usage(2);
    }
  }
  if (f.costSeconds <= 0 || f.costRounds < 1 || f.keepaliveLocks < 1 ||
      f.floorSeconds <= 0) {
    std::cerr << "dlm_bench: --cost_seconds, --cost_rounds, "
                 "--keepalive_locks, --floor_seconds must be positive\n";
    usage(2);
  }
  if (f.keys < 1 || f.seconds <= 0 || f.warmup < 0 || f.procs < 1 ||
      f.rounds < 1 || f.sleepMs < 1 || f.holdMs < 0 || f.readersThreads < 1 ||
      f.readersKeys < 1 || f.sharedPercent < 0 || f.sharedPercent > 100 ||
      f.readersHoldUs < 0) {
    std::cerr << "dlm_bench: --keys, --seconds, --procs, --sleep_ms, "
                 "--readers_threads, --readers_keys must be positive, "
                 "--shared_percent in [0, 100]\n";
    usage(2);
  }
  return f;
}

// --- samples and timed runs --------------------------------------------------

void Samples::append(const Samples& other) {
  us_.insert(us_.end(), other.us_.begin(), other.us_.end());
  sorted_ = false;
}

double Samples::percentileUs(double p) const {
  if (us_.empty()) return 0;
  if (!sorted_) {
    std::sort(us_.begin(), us_.end());
    sorted_ = true;
  }
  // Nearest rank.
  const double rank = std::ceil(p / 100.0 * us_.size());
  std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  if (i >= us_.size()) i = us_.size() - 1;
  return us_[i];
}

RunStats timedRun(int threads, double seconds, double warmup,
                  const std::function<Operation(int)>& makeWorker) {
  return timedRun(threads, seconds, warmup, makeWorker, WindowHooks{});
}

RunStats timedRun(int threads, double seconds, double warmup,
                  const std::function<Operation(int)>& makeWorker,
                  const WindowHooks& hooks) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> windowBegin{0};
  std::atomic<std::int64_t> windowEnd{0};
  std::mutex mu;
  std::exception_ptr failure;
  struct Span {
    std::int64_t begin, end;
    int tag;
  };
  std::vector<std::vector<Span>> spans(threads);

  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        Operation op = makeWorker(t);
        auto& mine = spans[t];
        mine.reserve(1 << 16);
        ready.fetch_add(1);
        while (!go.load())
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        while (!stop.load()) {
          const std::int64_t begin = nowNs();
          const int tag = op();
          const std::int64_t end = nowNs();
          if (tag >= 0 && tag < 4) mine.push_back(Span{begin, end, tag});
        }
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (!failure) failure = std::current_exception();
        }
        ready.fetch_add(1);
        stop.store(true);
      }
    });
  }
  while (ready.load() < threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto cpuNow = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  };
  const double cpuStart = cpuNow();
  if (hooks.schedule && !stop.load()) {
    const auto window = hooks.schedule();
    windowBegin = window.first;
    windowEnd = window.second;
  } else {
    const std::int64_t start = nowNs();
    windowBegin = start + static_cast<std::int64_t>(warmup * 1e9);
    windowEnd = windowBegin + static_cast<std::int64_t>(seconds * 1e9);
  }
  go.store(true);
  auto sleepUntil = [&](std::int64_t t) {
    while (!stop.load()) {
      const std::int64_t left = t - nowNs();
      if (left <= 0) break;
      std::this_thread::sleep_for(
          std::chrono::nanoseconds(std::min<std::int64_t>(left, 5000000)));
    }
  };
  sleepUntil(windowBegin);
  if (hooks.atBegin && !stop.load()) hooks.atBegin();
  sleepUntil(windowEnd);
  if (hooks.atEnd && !stop.load()) hooks.atEnd();
  stop.store(true);
  for (auto& th : pool) th.join();
  if (failure) std::rethrow_exception(failure);

  RunStats stats;
  stats.cpuSeconds = cpuNow() - cpuStart;
  stats.seconds = (windowEnd - windowBegin) / 1e9;
  for (const auto& mine : spans) {
    stats.allOps += mine.size();
    for (const Span& s : mine) {
      if (s.end >= windowBegin && s.end < windowEnd) {
        ++stats.endedInWindow;
        ++stats.endedByTag[s.tag];
      }
      if (s.begin >= windowBegin && s.end <= windowEnd) {
        ++stats.ops;
        ++stats.byTag[s.tag];
        stats.latency.add((s.end - s.begin) / 1e3);
      }
    }
  }
  return stats;
}

void merge(RunStats& into, const RunStats& from) {
  into.seconds += from.seconds;
  into.ops += from.ops;
  into.cpuSeconds += from.cpuSeconds;
  into.allOps += from.allOps;
  into.endedInWindow += from.endedInWindow;
  for (int i = 0; i < 4; ++i) into.endedByTag[i] += from.endedByTag[i];
  for (int i = 0; i < 4; ++i) into.byTag[i] += from.byTag[i];
  into.latency.append(from.latency);
}

std::vector<RunStats> interleaved(
    int variants, int rounds, double seconds, double warmup,
    const std::function<RunStats(int, double, double)>& run) {
  std::vector<RunStats> out(variants);
  for (int r = 0; r < rounds; ++r) {
    for (int v = 0; v < variants; ++v) {
      merge(out[v], run(v, seconds / rounds, warmup));
    }
  }
  return out;
}

// --- report ------------------------------------------------------------------

std::string fmtDouble(double v, int precision) {
  if (v < 0) return "-";
  return fmt::format("{:.{}f}", v, precision);
}

void Report::add(Result r) {
  std::cout << fmt::format(
                   "{:<22} {:<8} {:<26} {:>10} ops/s  p50 {:>8} ms  p99 {:>8} "
                   "ms  {}{}{}",
                   r.workload, r.store, r.config, fmtDouble(r.opsPerSec, 0),
                   fmtDouble(r.p50Ms, 3), fmtDouble(r.p99Ms, 3), r.ratio,
                   r.extra.empty() ? "" : "  ", r.extra)
            << std::endl;
  results_.push_back(std::move(r));
}

void Report::addTarget(const std::string& text, bool met,
                       const std::string& group) {
  std::cout << "TARGET " << (met ? "met   " : "MISSED") << "  " << text
            << std::endl;
  targets_.push_back(Target{group, text, met});
}

void Report::addNote(const std::string& group, const std::string& text) {
  std::cout << "NOTE    " << text << std::endl;
  notes_.push_back(Target{group, text, true});
}

const Result* Report::find(const std::string& workload,
                           const std::string& config) const {
  for (const auto& r : results_) {
    if (r.workload == workload && r.config == config) return &r;
  }
  return nullptr;
}

std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  return fmt::format("{:.2f} {:.2f} {:.2f}", a, b, c);
}

std::string utcDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

namespace {

std::string mdCell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c;
    }
  }
  return out.empty() ? "" : out;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string jsonNumber(double v) {
  if (v < 0 || !std::isfinite(v)) return "null";
  return fmt::format("{:.6g}", v);
}

}  // namespace

void writeMarkdown(const std::string& path, const Flags& flags,
                   const Machine& m, const Report& report) {
  std::ofstream out(path);
  out << "# dlm_bench results\n\n";
  out << fmt::format("- date: {}\n", m.date);
  out << fmt::format(
      "- machine: {}, {} cores; load average {} (start) / {} "
      "(end)\n",
      m.cpu, m.cores, m.loadStart, m.loadEnd);
  out << fmt::format("- PostgreSQL {}; SQLite {}\n", m.postgresVersion,
                     m.sqliteVersion);
  if (!flags.command.empty()) {
    out << fmt::format("- command: `{}`\n", flags.command);
  }
  out << fmt::format(
      "- {} s measured per run after {} s warm-up; handoff waiters "
      "sleepBetweenRetries = {} ms, hold {} ms\n",
      flags.seconds, flags.warmup, flags.sleepMs, flags.holdMs);
  if (!flags.note.empty()) out << fmt::format("- conditions: {}\n", flags.note);
  out << "\n| workload | store | config | ops/s | p50 ms | p99 ms | ratio | "
         "notes |\n|---|---|---|---:|---:|---:|---|---|\n";
  for (const auto& r : report.allResults()) {
    out << fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                       mdCell(r.workload), r.store, mdCell(r.config),
                       fmtDouble(r.opsPerSec, 0), fmtDouble(r.p50Ms, 3),
                       fmtDouble(r.p99Ms, 3), mdCell(r.ratio), mdCell(r.extra));
  }
  // The notes' sections (figures, no verdict), then the targets'.
  std::vector<std::string> noteGroups;
  for (const auto& n : report.notes()) {
    if (std::find(noteGroups.begin(), noteGroups.end(), n.group) ==
        noteGroups.end()) {
      noteGroups.push_back(n.group);
    }
  }
  for (const auto& group : noteGroups) {
    out << fmt::format("\n## {}\n\n", group);
    for (const auto& n : report.notes()) {
      if (n.group == group) out << fmt::format("- {}\n", n.text);
    }
  }
  // One section per group, in the order their first target came.
  std::vector<std::string> groups;
  for (const auto& t : report.targets()) {
    if (std::find(groups.begin(), groups.end(), t.group) == groups.end()) {
      groups.push_back(t.group);
    }
  }
  for (const auto& group : groups) {
    out << fmt::format("\n## Targets ({})\n\n", group);
    for (const auto& t : report.targets()) {
      if (t.group != group) continue;
      out << fmt::format("- {} {}\n", t.met ? "met:" : "**MISSED:**", t.text);
    }
  }
}

void writeJson(const std::string& path, const Flags& flags, const Machine& m,
               const Report& report) {
  std::ofstream out(path);
  out << "{\n";
  out << fmt::format(
      "  \"machine\": {{\"cpu\": {}, \"cores\": {}, \"postgres\": {}, "
      "\"sqlite\": {}, \"load_start\": {}, \"load_end\": {}, \"date\": {}}},\n",
      jsonString(m.cpu), m.cores, jsonString(m.postgresVersion),
      jsonString(m.sqliteVersion), jsonString(m.loadStart),
      jsonString(m.loadEnd), jsonString(m.date));
  out << fmt::format(
      "  \"config\": {{\"seconds\": {}, \"warmup\": {}, \"sleep_ms\": {}, "
      "\"hold_ms\": {}, \"command\": {}, \"note\": {}}},\n",
      flags.seconds, flags.warmup, flags.sleepMs, flags.holdMs,
      jsonString(flags.command), jsonString(flags.note));
  out << "  \"results\": [\n";
  const auto& rs = report.allResults();
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    out << fmt::format(
        "    {{\"workload\": {}, \"store\": {}, \"config\": {}, "
        "\"ops_per_s\": {}, \"p50_ms\": {}, \"p99_ms\": {}, \"ratio\": {}, "
        "\"notes\": {}",
        jsonString(r.workload), jsonString(r.store), jsonString(r.config),
        jsonNumber(r.opsPerSec), jsonNumber(r.p50Ms), jsonNumber(r.p99Ms),
        jsonString(r.ratio), jsonString(r.extra));
    for (const auto& [k, v] : r.numbers) {
      out << fmt::format(", {}: {}", jsonString(k), jsonNumber(v));
    }
    out << (i + 1 < rs.size() ? "},\n" : "}\n");
  }
  out << "  ],\n  \"targets\": [\n";
  const auto& ts = report.targets();
  for (std::size_t i = 0; i < ts.size(); ++i) {
    out << fmt::format("    {{\"group\": {}, \"target\": {}, \"met\": {}}}{}\n",
                       jsonString(ts[i].group), jsonString(ts[i].text),
                       ts[i].met ? "true" : "false",
                       i + 1 < ts.size() ? "," : "");
  }
  out << "  ],\n  \"notes\": [\n";
  const auto& ns = report.notes();
  for (std::size_t i = 0; i < ns.size(); ++i) {
    out << fmt::format("    {{\"group\": {}, \"text\": {}}}{}\n",
                       jsonString(ns[i].group), jsonString(ns[i].text),
                       i + 1 < ns.size() ? "," : "");
  }
  out << "  ]\n}\n";
}

std::string randomHex(std::mt19937_64& rng, int chars) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(chars, '0');
  for (auto& c : s) c = kDigits[rng() & 15];
  return s;
}

Result resultOf(const std::string& workload, const std::string& store,
                const std::string& config, const RunStats& s,
                const std::string& cpuKey) {
  Result r;
  r.workload = workload;
  r.store = store;
  r.config = config;
  r.opsPerSec = s.opsPerSec();
  r.p50Ms = s.latency.percentileUs(50) / 1e3;
  r.p99Ms = s.latency.percentileUs(99) / 1e3;
  r.numbers["ops"] = static_cast<double>(s.ops);
  r.numbers[cpuKey] = s.cpuUsPerOp();
  return r;
}

}  // namespace dlm_bench
