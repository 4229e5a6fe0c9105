// A thin raw-libpq connection for the baselines and for reading the server's
// statistics: no library code between the benchmark and the server.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>
#include <vector>

namespace dlm_bench {

struct PgResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, PgResultCloser>;

class PgConn {
 public:
  // conninfo: libpq connection string; empty means the PG* variables.
  explicit PgConn(const std::string& conninfo);
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  ~PgConn();

  // Runs SQL text (simple protocol); throws std::runtime_error on failure.
  PgResult exec(const std::string& sql);
  // The first column of the first row as text ("" when NULL / no rows).
  std::string value(const std::string& sql);
  void prepare(const std::string& name, const std::string& sql);
  // Executes a prepared statement with text parameters (nullptr = NULL).
  PgResult execPrepared(const std::string& name,
                        const std::vector<const char*>& params);
  PGconn* raw() { return conn_; }

 private:
  PgResult check(PGresult* r, const std::string& what);
  PGconn* conn_ = nullptr;
};

// "dbname=<db>" appended to a base conninfo (which may be empty).
std::string withDatabase(const std::string& base, const std::string& db);

}  // namespace dlm_bench
