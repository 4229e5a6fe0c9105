#include "pg_raw.h"

#include <fmt/format.h>

#include <stdexcept>

#include "proc_meter.h"

namespace dlm_bench {

PgConn::PgConn(const std::string& conninfo) {
  conn_ = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) {
    const std::string msg = PQerrorMessage(conn_);
    PQfinish(conn_);
    conn_ = nullptr;
    throw std::runtime_error("libpq connect failed: " + msg);
  }
  // Silence NOTICEs (DROP ... IF EXISTS and the like).
  PQsetNoticeProcessor(
      conn_, [](void*, const char*) {}, nullptr);
  // A metered run counts the CPU of the backend serving this connection.
  if (BackendRegistry::global().collecting()) {
    BackendRegistry::global().add(std::stoi(value("SELECT pg_backend_pid()")));
  }
}

PgConn::~PgConn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

PgResult PgConn::check(PGresult* raw, const std::string& what) {
  PgResult r(raw);
  const ExecStatusType st = PQresultStatus(raw);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    throw std::runtime_error(
        fmt::format("{}: {}", what, PQresultErrorMessage(raw)));
  }
  return r;
}

PgResult PgConn::exec(const std::string& sql) {
  return check(PQexec(conn_, sql.c_str()), sql.substr(0, 80));
}

std::string PgConn::value(const std::string& sql) {
  PgResult r = exec(sql);
  if (PQntuples(r.get()) == 0 || PQgetisnull(r.get(), 0, 0)) return "";
  return PQgetvalue(r.get(), 0, 0);
}

void PgConn::prepare(const std::string& name, const std::string& sql) {
  check(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr),
        "prepare " + name);
}

PgResult PgConn::execPrepared(const std::string& name,
                              const std::vector<const char*>& params) {
  return check(
      PQexecPrepared(conn_, name.c_str(), static_cast<int>(params.size()),
                     params.data(), nullptr, nullptr, 0),
      name);
}

std::string withDatabase(const std::string& base, const std::string& db) {
  // Later keywords win in a libpq conninfo string.
  return base.empty() ? "dbname=" + db : base + " dbname=" + db;
}

}  // namespace dlm_bench
