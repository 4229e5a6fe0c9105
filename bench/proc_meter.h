// What the database pays for a workload, read from /proc: the CPU time
// (utime + stime of /proc/<pid>/stat) of the server backends that served
// it, plus the shared server processes that work for every commit (the WAL
// writer, and with a standby the WAL sender), WAL flushes (pg_stat_wal
// wal_sync) and the client's own CPU (getrusage RUSAGE_SELF). The bench runs
// on the same machine as the cluster, as root, so every backend's /proc is
// readable.
//
// Which backends: a raw-libpq baseline's connections say who serves them
// (SELECT pg_backend_pid(), recorded in BackendRegistry when it is
// collecting); the library's pooled connections are found in
// pg_stat_activity by their application_name (PostgresStoreOptions::
// applicationName, unique per measured manager), at the start and at the
// end of the window (a pool opens connections lazily).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pg_raw.h"

namespace dlm_bench {

// CPU time (user + system) of process `pid` in nanoseconds, from
// /proc/<pid>/schedstat (its run time, to the nanosecond: utime + stime in
// /proc/<pid>/stat count 10 ms ticks, a step of 3 us per operation over a
// 3 s window of 1,000 operations a second); from utime + stime where the
// kernel has no schedstat. -1 when it is gone.
long procCpuNs(int pid);
// This process's user + system CPU time in microseconds (getrusage).
double selfCpuUs();
// True while /proc/<pid> exists.
bool processAlive(int pid);

// The backend pids of the connections opened while collecting (PgConn's
// constructor asks each new connection SELECT pg_backend_pid()).
class BackendRegistry {
 public:
  static BackendRegistry& global();
  void start();  // clears, then records new connections
  void stop();
  bool collecting() const;
  void add(int pid);
  std::vector<int> pids() const;

 private:
  mutable std::mutex mu_;
  bool collecting_ = false;
  std::set<int> pids_;
};

// Pids of client backends whose application_name starts with `prefix`.
std::vector<int> backendsByApplication(PgConn& admin,
                                       const std::string& prefix);

// One reading of the counters.
struct CostSnapshot {
  std::map<int, long> backendNs;  // the measured backends
  long sharedNs = 0;              // walwriter (+ walsenders)
  std::map<int, long> sharedByPid;
  double clientUs = 0;  // this process (getrusage)
  std::int64_t ns = 0;  // CLOCK_MONOTONIC
};

// The cost of one measured window.
struct WindowCost {
  double seconds = 0;
  double backendUs = 0;  // the workload's backends
  double sharedUs = 0;   // walwriter (+ walsenders)
  double clientUs = 0;   // the client processes
  int backends = 0;      // backends counted
  int lostBackends = 0;  // seen at the start, gone at the end (not counted)
  double serverUs() const { return backendUs + sharedUs; }
};

class ServerMeter {
 public:
  // admin: a connection of its own (its backend is not counted).
  explicit ServerMeter(PgConn& admin);
  // Re-reads which shared processes count (walwriter, walsenders): call
  // after a standby attached or left.
  void refreshShared();
  std::string sharedDescription() const;
  CostSnapshot take(const std::vector<int>& backends) const;
  // end - begin. Backends only in `end` count from zero (opened in the
  // window); backends only in `begin` are lost (exited: not readable).
  static WindowCost diff(const CostSnapshot& begin, const CostSnapshot& end);
  // pg_stat_wal.wal_sync (a backend's counts arrive when it exits at the
  // latest: read it before the workload connects and after its backends
  // are gone).
  double walSync() const;
  // Waits (at most `ms`) until every pid has exited.
  static void waitGone(const std::vector<int>& pids, int ms = 5000);

 private:
  PgConn& admin_;
  std::vector<std::pair<int, std::string>> shared_;  // pid, backend_type
};

}  // namespace dlm_bench
