// Shared pieces of dlm_bench: flags, latency samples, timed multi-thread
// runs, results and their reports.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace dlm_bench {

using SteadyClock = std::chrono::steady_clock;

// Nanoseconds on CLOCK_MONOTONIC: comparable between threads and between
// forked processes.
std::int64_t nowNs();

// Command-line flags, db_bench style: --name=value.
struct Flags {
  std::vector<std::string> benchmarks{
      "cost",   "cycle", "roundtrips", "handoff", "scale", "procs",
      "readers", "pooler", "events",    "junk",  "guard", "floor"};
  std::vector<std::string> stores{"postgres", "sqlite"};
  std::vector<int> threads{1, 4, 16};
  double seconds = 4;
  double warmup = 0.25;
  int rounds = 4;  // interleaved rounds of compared variants
  std::vector<long> rows{1000, 100000, 1000000};
  std::vector<int> depths{1, 4, 8};
  std::vector<int> waiters{1, 4, 16};
  std::vector<int> contendedThreads{4, 16};
  int sleepMs = 50;  // sleepBetweenRetries of the handoff waiters
  int holdMs = 5;    // how long each handoff holder keeps the lock
  int procs = 4;
  // readers: threads on a few keys, sharedPercent of the acquisitions
  // SHARED, each held readersHoldUs.
  int readersThreads = 8;
  int readersKeys = 4;
  int sharedPercent = 90;
  int readersHoldUs = 5000;
  int keys = 1000;  // key pool per thread (cycle)
  int ttlMs = 60000;
  std::string pgConnection;  // admin connection; empty = libpq PG* vars
  std::string dbName = "dlm_bench";
  // SQL run in every benchmark schema after the migrations (to try a
  // proposed schema change without editing schema/ or migrations/).
  std::string pgAfterSchema;
  // PgBouncer (transaction pooling) in front of the same server, for the
  // pooler workload; empty: that workload does not run.
  std::string pgPooler;
  std::string sqliteDir = "dlm_bench_sqlite";
  std::string resultsDir;  // empty: print only
  std::string command;     // the command line to quote in latest.md
  std::string note;        // conditions to quote in latest.md
  // The cost workloads (pg_cost.cpp): the metered window of each slice,
  // and the commands that start / stop a synchronous standby of the
  // cluster (empty: the standby condition does not run).
  double costSeconds = 1.2;
  int costRounds = 3;
  std::string standbyStart;
  std::string standbyStop;
  int keepaliveLocks = 1000;
  // floor (pg_cost.cpp): the metered window of each batch-skeleton slice.
  double floorSeconds = 0.6;
  // Internal: a child process of the cost workload (--child=cycle).
  std::string child;
  std::string childVariant;
  std::string childApp;
  int childIndex = 0;

  bool wants(const std::string& benchmark) const;
  bool wantsStore(const std::string& store) const;
};

// Parses argv; prints usage and exits on --help or a bad flag.
Flags parseFlags(int argc, char** argv);

// Latencies in microseconds.
class Samples {
 public:
  void add(double us) { us_.push_back(us); }
  void append(const Samples& other);
  std::size_t size() const { return us_.size(); }
  // p in [0, 100]; 0 when empty.
  double percentileUs(double p) const;
  const std::vector<double>& values() const { return us_; }

 private:
  mutable std::vector<double> us_;
  mutable bool sorted_ = false;
};

// What one timed run measured.
struct RunStats {
  double seconds = 0;                     // the measured window
  std::uint64_t ops = 0;                  // operations that ended inside it
  std::uint64_t byTag[4] = {0, 0, 0, 0};  // the same, by the tag returned
  Samples latency;                        // of those operations
  // This process's CPU time (user + system) over the whole run, warm-up
  // included, and every operation of the run: the client's cost per
  // operation, which a noisy machine disturbs far less than throughput.
  double cpuSeconds = 0;
  std::uint64_t allOps = 0;
  // Operations that ended inside the window, wherever they began (what a
  // cost measured over the window is divided by).
  std::uint64_t endedInWindow = 0;
  std::uint64_t endedByTag[4] = {0, 0, 0, 0};
  double opsPerSec() const { return seconds > 0 ? ops / seconds : 0; }
  double cpuUsPerOp() const { return allOps ? cpuSeconds * 1e6 / allOps : 0; }
};

// One operation of a worker thread. Returns a tag in [0, 4) under which the
// operation is counted (e.g. 0 = acquired, 1 = refused), or -1 to not count
// it at all.
using Operation = std::function<int()>;

// Runs `threads` threads. Each calls makeWorker(index) (connects, prepares)
// before the clock starts, then repeats its operation for warmup + seconds.
// Only operations that started after the warmup and ended before the end of
// the window count. Exceptions in a worker end the run and are rethrown.
RunStats timedRun(int threads, double seconds, double warmup,
                  const std::function<Operation(int)>& makeWorker);

// What a metered run does at the edges of its window (all optional).
struct WindowHooks {
  // Called once every worker is ready; returns the window [begin, end) in
  // nowNs() time. Default: the warm-up, then `seconds`.
  std::function<std::pair<std::int64_t, std::int64_t>()> schedule;
  // Called on the calling thread at the window's start and end, while the
  // workers run (no worker stops, so no connection closes, before atEnd
  // returns).
  std::function<void()> atBegin;
  std::function<void()> atEnd;
};
RunStats timedRun(int threads, double seconds, double warmup,
                  const std::function<Operation(int)>& makeWorker,
                  const WindowHooks& hooks);

// Adds `from` to `into` (ops, seconds, samples).
void merge(RunStats& into, const RunStats& from);

// Runs `variants` measurements in `rounds` rounds: each round runs every
// variant in turn for seconds / rounds (after `warmup`), so slow phases of a
// shared machine hit all variants alike. Returns the merged stats per variant.
std::vector<RunStats> interleaved(
    int variants, int rounds, double seconds, double warmup,
    const std::function<RunStats(int variant, double seconds, double warmup)>&
        run);

// One printed line / table row.
struct Result {
  std::string workload;   // "cycle", "cycle.base_a", "handoff", ...
  std::string store;      // "postgres", "sqlite"
  std::string config;     // "threads=4", "rows=1000000 depth=1", ...
  double opsPerSec = -1;  // < 0: not applicable
  double p50Ms = -1;
  double p99Ms = -1;
  std::string extra;   // free text (failures/s, statements, ...)
  std::string ratio;   // "0.95x a, 2.1x b"
  std::string target;  // "cycle >= 0.9x a: met (0.95)"
  std::map<std::string, double> numbers;  // extra figures for latest.json
};

// A Result from a timed run: ops/s, p50/p99, and the run's ops and CPU per
// op under `cpuKey` in latest.json ("client_cpu_us_per_op" when the server
// is another process, "cpu_us_per_op" for SQLite, which runs in-process).
Result resultOf(const std::string& workload, const std::string& store,
                const std::string& config, const RunStats& s,
                const std::string& cpuKey);

class Report {
 public:
  void add(Result r);  // prints the line at once
  const std::vector<Result>& allResults() const { return results_; }
  // A target line, under the heading of its group.
  struct Target {
    std::string group;
    std::string text;
    bool met = false;
  };
  void addTarget(const std::string& text, bool met,
                 const std::string& group = "library against raw SQL");
  const std::vector<Target>& targets() const { return targets_; }
  // A line of figures (not a target) under a heading of its own.
  void addNote(const std::string& group, const std::string& text);
  const std::vector<Target>& notes() const { return notes_; }
  const Result* find(const std::string& workload,
                     const std::string& config) const;

 private:
  std::vector<Result> results_;
  std::vector<Target> targets_;
  std::vector<Target> notes_;
};

// Machine and software facts for latest.md.
struct Machine {
  std::string cpu;
  unsigned cores = 0;
  std::string postgresVersion;
  std::string sqliteVersion;
  std::string loadStart;
  std::string loadEnd;
  std::string date;
};
std::string cpuModel();
std::string loadAverage();
std::string utcDate();

void writeMarkdown(const std::string& path, const Flags& flags,
                   const Machine& machine, const Report& report);
void writeJson(const std::string& path, const Flags& flags,
               const Machine& machine, const Report& report);

// A random hex string (tokens, owners of the raw baselines).
std::string randomHex(std::mt19937_64& rng, int chars);
std::string fmtDouble(double v, int precision);

}  // namespace dlm_bench
