#include "proc_meter.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "bench_util.h"

namespace dlm_bench {

namespace {

// utime + stime from /proc/<pid>/stat, in nanoseconds; -1 when unreadable.
long statCpuNs(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  if (!in) return -1;
  const std::string line((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  // Field 2 (comm) is in parentheses and may hold spaces: count from the
  // last ')'. Field 3 follows it; utime and stime are fields 14 and 15.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  long utime = -1, stime = -1;
  for (int n = 3; n <= 15 && rest >> field; ++n) {
    if (n == 14) utime = std::stol(field);
    if (n == 15) stime = std::stol(field);
  }
  if (utime < 0 || stime < 0) return -1;
  static const long nsPerTick = 1000000000L / sysconf(_SC_CLK_TCK);
  return (utime + stime) * nsPerTick;
}

}  // namespace

long procCpuNs(int pid) {
  // schedstat: run time (ns), wait time (ns), time slices.
  std::ifstream in(fmt::format("/proc/{}/schedstat", pid));
  long ns = -1;
  if (in >> ns && ns >= 0) return ns;
  return statCpuNs(pid);
}

double selfCpuUs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec +
         u.ru_stime.tv_usec;
}

bool processAlive(int pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  return static_cast<bool>(in);
}

BackendRegistry& BackendRegistry::global() {
  static BackendRegistry r;
  return r;
}

void BackendRegistry::start() {
  std::lock_guard<std::mutex> lock(mu_);
  pids_.clear();
  collecting_ = true;
}

void BackendRegistry::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  collecting_ = false;
}

bool BackendRegistry::collecting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return collecting_;
}

void BackendRegistry::add(int pid) {
  std::lock_guard<std::mutex> lock(mu_);
  if (collecting_) pids_.insert(pid);
}

std::vector<int> BackendRegistry::pids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {pids_.begin(), pids_.end()};
}

std::vector<int> backendsByApplication(PgConn& admin,
                                       const std::string& prefix) {
  // The prefix is the bench's own (letters and digits): no quoting needed
  // beyond this check.
  for (char c : prefix) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      throw std::runtime_error("backendsByApplication: bad prefix " + prefix);
    }
  }
  PgResult r = admin.exec(fmt::format(
      "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client "
      "backend' AND application_name LIKE '{}%'",
      prefix));
  std::vector<int> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    out.push_back(std::stoi(PQgetvalue(r.get(), i, 0)));
  }
  return out;
}

ServerMeter::ServerMeter(PgConn& admin) : admin_(admin) { refreshShared(); }

void ServerMeter::refreshShared() {
  // The WAL writer flushes what asynchronous commits (dlm's lazy releases)
  // leave behind and writes WAL ahead of the backends; a WAL sender ships
  // every commit to the standby (and a synchronous commit waits for it).
  // Both work for the workload alone while it is the only thing running.
  // Not counted: checkpointer, background writer, autovacuum (periodic,
  // not per operation; a window would catch them or not by chance).
  PgResult r = admin_.exec(
      "SELECT pid, backend_type FROM pg_stat_activity WHERE backend_type IN "
      "('walwriter', 'walsender') ORDER BY backend_type, pid");
  shared_.clear();
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    shared_.emplace_back(std::stoi(PQgetvalue(r.get(), i, 0)),
                         PQgetvalue(r.get(), i, 1));
  }
}

std::string ServerMeter::sharedDescription() const {
  std::string out;
  for (const auto& [pid, type] : shared_) {
    out += (out.empty() ? "" : ", ") + type;
  }
  return out.empty() ? "none" : out;
}

CostSnapshot ServerMeter::take(const std::vector<int>& backends) const {
  CostSnapshot s;
  s.ns = nowNs();
  s.clientUs = selfCpuUs();
  for (int pid : backends) {
    const long t = procCpuNs(pid);
    if (t >= 0) s.backendNs[pid] = t;
  }
  for (const auto& entry : shared_) {
    const long t = procCpuNs(entry.first);
    if (t >= 0) {
      s.sharedByPid[entry.first] = t;
      s.sharedNs += t;
    }
  }
  return s;
}

WindowCost ServerMeter::diff(const CostSnapshot& begin,
                             const CostSnapshot& end) {
  WindowCost c;
  c.seconds = (end.ns - begin.ns) / 1e9;
  c.clientUs = end.clientUs - begin.clientUs;
  long ns = 0;
  for (const auto& [pid, t] : end.backendNs) {
    const auto b = begin.backendNs.find(pid);
    ns += t - (b == begin.backendNs.end() ? 0 : b->second);
    ++c.backends;
  }
  for (const auto& [pid, t] : begin.backendNs) {
    if (end.backendNs.count(pid) == 0) ++c.lostBackends;
  }
  c.backendUs = static_cast<double>(ns) / 1000.0;
  long shared = 0;
  for (const auto& [pid, t] : end.sharedByPid) {
    const auto b = begin.sharedByPid.find(pid);
    if (b != begin.sharedByPid.end()) shared += t - b->second;
  }
  c.sharedUs = static_cast<double>(shared) / 1000.0;
  return c;
}

double ServerMeter::walSync() const {
  return std::stod(admin_.value("SELECT wal_sync FROM pg_stat_wal"));
}

void ServerMeter::waitGone(const std::vector<int>& pids, int ms) {
  const std::int64_t until = nowNs() + static_cast<std::int64_t>(ms) * 1000000;
  for (int pid : pids) {
    while (processAlive(pid) && nowNs() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

}  // namespace dlm_bench
