#include "postgres/pg_session.h"

#include <fmt/format.h>

#include <utility>

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
  return PgConn::open(p, deadline, wakeFd);
}

std::unique_ptr<PgConn> PgSessions::openForStore(Deadline deadline) const {
  std::unique_ptr<PgConn> conn = open(deadline);
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

}  // namespace dlm::internal
