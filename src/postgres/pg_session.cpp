#include "postgres/pg_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <utility>
#include <vector>

#include "dlm/error.h"
#include "postgres/connect_error.h"

namespace dlm::internal {
namespace {

// PostgreSQL keeps NAMEDATALEN - 1 bytes of application_name.
constexpr std::size_t kMaxApplicationName = 63;

ConnParams withDefaults(const std::string& conninfo) {
  ConnParams p = ConnParams::parse(conninfo);
  // A dead peer must be noticed without a statement in flight (the LISTEN
  // connection, idle pooled ones); a stalled one by the call's deadline.
  p.setDefault("keepalives", "1");
  p.setDefault("keepalives_idle", kKeepalivesIdleSeconds);
  p.setDefault("keepalives_interval", kKeepalivesIntervalSeconds);
  p.setDefault("keepalives_count", kKeepalivesCount);
  p.setDefault("tcp_user_timeout", kTcpUserTimeoutMs);
  return p;
}

// The i-th of a comma list that is either one value for all hosts or one
// per host ("" when unset).
std::string nth(const std::vector<std::string>& items, std::size_t i) {
  if (items.empty()) return "";
  return items.size() == 1 ? items[0] : items[std::min(i, items.size() - 1)];
}

// One ConnParams per host of a multi-host conninfo; just `p` otherwise.
std::vector<ConnParams> perHost(const ConnParams& p) {
  const auto hosts = splitCommas(p.value("host"));
  const auto addrs = splitCommas(p.value("hostaddr"));
  const std::size_t n = std::max(hosts.size(), addrs.size());
  if (n <= 1) return {p};
  const auto ports = splitCommas(p.value("port"));
  std::vector<ConnParams> out;
  for (std::size_t i = 0; i < n; ++i) {
    ConnParams one = p;
    if (p.has("host")) one.set("host", nth(hosts, i));
    if (p.has("hostaddr")) one.set("hostaddr", nth(addrs, i));
    if (p.has("port")) one.set("port", nth(ports, i));
    out.push_back(std::move(one));
  }
  return out;
}

// connect_timeout as libpq reads it (seconds, at least 2); 0 when unset.
std::chrono::seconds connectTimeoutOf(const ConnParams& p) {
  const long s = std::strtol(p.value("connect_timeout").c_str(), nullptr, 10);
  if (s <= 0) return std::chrono::seconds(0);
  return std::chrono::seconds(std::max(s, 2L));
}

}  // namespace

std::string applicationNameOf(std::string_view base,
                              const std::set<std::string>& clients) {
  std::string name(base);
  const char* separator = " ";
  for (const std::string& c : clients) {
    name += separator;
    name += c;
    separator = ",";
  }
  for (char& ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u > 0x7e) ch = '?';
  }
  if (name.size() > kMaxApplicationName) name.resize(kMaxApplicationName);
  return name;
}

PgSessions::PgSessions(const PostgresStoreOptions& options)
    : options_(options), params_(withDefaults(options.connection)) {}

void PgSessions::addClient(std::string_view clientId) {
  std::lock_guard<std::mutex> lock(mu_);
  clients_.emplace(clientId);
}

std::string PgSessions::applicationName() const {
  std::lock_guard<std::mutex> lock(mu_);
  return applicationNameOf(options_.applicationName, clients_);
}

std::unique_ptr<PgConn> PgSessions::open(Deadline deadline, int wakeFd) const {
  ConnParams p = params_;
  // The user's own application_name (conninfo or PGAPPNAME) wins.
  p.setDefault("application_name", applicationName());
  const std::vector<ConnParams> hosts = perHost(p);
  const std::chrono::seconds perHostCap = connectTimeoutOf(p);
  std::exception_ptr last;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::size_t left = hosts.size() - i;
    // Deadline::max() (no bound) stays unbounded for all but the cap.
    Deadline d = deadline;
    if (deadline != Deadline::max()) {
      d = std::chrono::steady_clock::now() +
          (deadline - std::chrono::steady_clock::now()) / left;
    }
    if (perHostCap.count() > 0) d = std::min(d, deadlineAfter(perHostCap));
    if (left == 1) d = std::min(deadline, d);
    try {
      return PgConn::open(hosts[i], d, wakeFd);
    } catch (const DLMException& e) {
      // A wake-up (INTERNAL_ERROR "interrupted") ends the attempt at once.
      if (e.code() != ErrorCode::CONNECTION_ERROR) throw;
      last = std::current_exception();
    } catch (const PgError& e) {
      // A host that refused the login ends the attempt, as libpq's own
      // multi-host connect does: the next one is not tried.
      if (isAuthenticationFailure(e.sqlstate())) throw;
      last = std::current_exception();
    }
  }
  std::rethrow_exception(last);
}

std::unique_ptr<PgConn> PgSessions::openForStore(Deadline deadline) const {
  std::unique_ptr<PgConn> conn = open(deadline);
  if (options_.poolerSafe) {
    // The same settings, sent with every call instead (pg_conn.h).
    std::string sql =
        "SELECT set_config('lock_timeout', $1, true), "
        "set_config('statement_timeout', $2, true)";
    std::vector<std::string> values{
        std::to_string(options_.rowLockWait.count()),
        std::to_string(options_.operationTimeout.count())};
    if (conn->serverVersion() >= 120000) {
      sql += ", set_config('plan_cache_mode', 'force_generic_plan', true)";
    }
    if (!options_.schema.empty()) {
      sql += ", set_config('search_path', $3, true)";
      values.push_back(conn->quoteIdentifier(options_.schema));
    }
    conn->sendSettingsWithEachCall(std::move(sql), std::move(values));
    return conn;
  }
  std::string sql;
  if (!options_.schema.empty()) {
    sql += fmt::format("SET search_path = {};",
                       conn->quoteIdentifier(options_.schema));
  }
  // A row lock held by someone else's open transaction: give up after
  // rowLockWait (55P03) instead of waiting with the caller blocked.
  sql += fmt::format("SET lock_timeout = {};", options_.rowLockWait.count());
  // The server-side bound of every statement, should the client's deadline
  // not be there to cut it (57014).
  sql += fmt::format("SET statement_timeout = {};",
                     options_.operationTimeout.count());
  // Custom plans were re-made on every call of dlm_acquire (its descendant
  // range check), about 0.05 ms of planning per acquire; the generic plans
  // are the same index scans. PostgreSQL 12 and later only.
  if (conn->serverVersion() >= 120000) {
    sql += "SET plan_cache_mode = force_generic_plan;";
  }
  conn->exec(sql, deadline);
  return conn;
}

std::vector<std::string> splitCommas(const std::string& list) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    items.push_back(list.substr(start, comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

}  // namespace dlm::internal
