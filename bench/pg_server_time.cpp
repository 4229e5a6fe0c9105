#include "pg_server_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace dlm_bench {

namespace {

// Query text on one line, at most `max` characters.
std::string shortQuery(const std::string& q, std::size_t max = 70) {
  std::string out;
  bool space = false;
  for (char c : q) {
    if (c == '\n' || c == '\t' || c == '\r' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

}  // namespace

ServerProbe::ServerProbe(PgConn& admin, const std::string& db,
                         const std::string& conninfo)
    : admin_(admin), db_(db), sessionConninfo_(conninfo) {
  oid_ = admin_.value(
      fmt::format("SELECT oid FROM pg_database WHERE datname = '{}'", db_));
  // pg_stat_statements only works when preloaded (scripts/bench.sh does).
  const std::string preload = admin_.value("SHOW shared_preload_libraries");
  if (preload.find("pg_stat_statements") != std::string::npos) {
    admin_.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    statements_ = true;
    // A superuser may set it per session (a startup option); others get
    // the server's setting (nested statements then show only if it is
    // already 'all').
    try {
      admin_.exec("SET pg_stat_statements.track = 'all'");
      admin_.exec("RESET pg_stat_statements.track");
      sessionConninfo_ += " options='-c pg_stat_statements.track=all'";
      trackAll_ = true;
    } catch (const std::runtime_error&) {
      trackAll_ = admin_.value("SHOW pg_stat_statements.track") == "all";
    }
  }
  try {
    admin_.value("SELECT wal_sync FROM pg_stat_wal");
    wal_ = true;
  } catch (const std::runtime_error&) {
    wal_ = false;  // before PostgreSQL 14
  }
}

ServerProbe::Snapshot ServerProbe::read() {
  // A backend's WAL statistics reach pg_stat_wal when it exits at the
  // latest: wait until the measured sessions are gone.
  for (int i = 0; i < 1000; ++i) {
    const std::string n = admin_.value(fmt::format(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND "
        "backend_type = 'client backend'",
        db_));
    if (n == "0") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Snapshot s;
  if (statements_) {
    PgResult r = admin_.exec(fmt::format(
        "SELECT queryid, toplevel, calls, total_exec_time, query FROM "
        "pg_stat_statements WHERE dbid = {}",
        oid_));
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      Entry e;
      e.toplevel = PQgetvalue(r.get(), i, 1)[0] == 't';
      e.calls = std::stod(PQgetvalue(r.get(), i, 2));
      e.ms = std::stod(PQgetvalue(r.get(), i, 3));
      e.query = PQgetvalue(r.get(), i, 4);
      s.entries[std::string(PQgetvalue(r.get(), i, 0)) +
                (e.toplevel ? "t" : "n")] = e;
    }
  }
  if (wal_) {
    PgResult r = admin_.exec(
        "SELECT wal_sync, wal_write, wal_records, wal_bytes FROM pg_stat_wal");
    s.walSync = std::stod(PQgetvalue(r.get(), 0, 0));
    s.walWrite = std::stod(PQgetvalue(r.get(), 0, 1));
    s.walRecords = std::stod(PQgetvalue(r.get(), 0, 2));
    s.walBytes = std::stod(PQgetvalue(r.get(), 0, 3));
  }
  return s;
}

ServerCost ServerProbe::diff(const Snapshot& a1, const Snapshot& b1,
                             const Snapshot& a2, const Snapshot& b2, int n1,
                             int n2) {
  ServerCost c;
  c.statements = statements_;
  c.nestedTracked = trackAll_;
  const double n = n2 - n1;
  auto delta = [](const Snapshot& before, const Snapshot& after,
                  const std::string& k) {
    const auto b = before.entries.find(k);
    const auto a = after.entries.find(k);
    if (a == after.entries.end()) return 0.0;
    return a->second.ms - (b == before.entries.end() ? 0.0 : b->second.ms);
  };
  if (statements_) {
    std::map<std::string, Entry> keys = b2.entries;
    keys.insert(b1.entries.begin(), b1.entries.end());
    c.serverUs = 0;
    c.nestedUs = 0;
    for (const auto& [k, e] : keys) {
      const double us = (delta(a2, b2, k) - delta(a1, b1, k)) * 1e3 / n;
      if (us <= 0.05) continue;  // setup only, or noise
      if (e.toplevel) {
        c.serverUs += us;
        c.topLevel.emplace_back(shortQuery(e.query), us);
      } else {
        c.nestedUs += us;
        c.nested.emplace_back(shortQuery(e.query), us);
      }
    }
    auto bySize = [](const auto& x, const auto& y) {
      return x.second > y.second;
    };
    std::sort(c.topLevel.begin(), c.topLevel.end(), bySize);
    std::sort(c.nested.begin(), c.nested.end(), bySize);
    if (c.nested.size() > 5) c.nested.resize(5);
    if (!trackAll_) c.nestedUs = -1;
  }
  if (wal_) {
    c.walSync = ((b2.walSync - a2.walSync) - (b1.walSync - a1.walSync)) / n;
    c.walWrite =
        ((b2.walWrite - a2.walWrite) - (b1.walWrite - a1.walWrite)) / n;
    c.walRecords =
        ((b2.walRecords - a2.walRecords) - (b1.walRecords - a1.walRecords)) / n;
    c.walBytes =
        ((b2.walBytes - a2.walBytes) - (b1.walBytes - a1.walBytes)) / n;
  }
  return c;
}

ServerCost ServerProbe::perOp(int operations,
                              const std::function<void(int n)>& session) {
  const int n2 = std::max(operations, 8);
  const int n1 = n2 / 4;
  const Snapshot a1 = read();
  session(n1);
  const Snapshot b1 = read();
  const Snapshot a2 = read();
  session(n2);
  const Snapshot b2 = read();
  return diff(a1, b1, a2, b2, n1, n2);
}

std::string ServerProbe::summary(const ServerCost& c) {
  const std::string server =
      c.statements ? fmt::format("server {:.1f} us", c.serverUs)
                   : std::string("server n/a (pg_stat_statements not loaded)");
  const std::string wal = c.walSync < 0
                              ? std::string("WAL n/a")
                              : fmt::format("WAL {:.2f} flushes, {:.2f} writes",
                                            c.walSync, c.walWrite);
  return server + ", " + wal + " per op";
}

std::string ServerProbe::breakdown(const ServerCost& c) {
  if (!c.statements) return "n/a (pg_stat_statements not loaded)";
  std::string out = "top-level:";
  for (const auto& [q, us] : c.topLevel) {
    out += fmt::format(" [{}] {:.1f} us;", q, us);
  }
  if (!c.nestedTracked) {
    return out +
           " nested: n/a (pg_stat_statements.track = 'all' not settable by "
           "this role)";
  }
  out += fmt::format(" nested {:.1f} us in all, top 5:", c.nestedUs);
  for (const auto& [q, us] : c.nested) {
    out += fmt::format(" [{}] {:.1f} us;", q, us);
  }
  if (c.nested.empty()) out += " none";
  return out;
}

void ServerProbe::addNumbers(const ServerCost& c, Result& r) {
  r.numbers["server_us_per_op"] = c.serverUs;
  r.numbers["nested_us_per_op"] = c.nestedUs;
  r.numbers["wal_sync_per_op"] = c.walSync;
  r.numbers["wal_write_per_op"] = c.walWrite;
  r.numbers["wal_records_per_op"] = c.walRecords;
  r.numbers["wal_bytes_per_op"] = c.walBytes;
}

}  // namespace dlm_bench
