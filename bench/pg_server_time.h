// Where a workload's server time goes: execution time per operation from
// pg_stat_statements (top-level statements, and the statements nested in
// dlm's functions when pg_stat_statements.track = 'all' can be set), and
// WAL writes / flushes per operation from pg_stat_wal.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"
#include "pg_raw.h"

namespace dlm_bench {

struct ServerCost {
  bool statements = false;  // pg_stat_statements loaded
  bool nestedTracked = false;
  double serverUs = -1;  // top-level total_exec_time per op
  // us per op, largest first: the top-level statements, and (trackAll) the
  // five nested statements that took the most time.
  std::vector<std::pair<std::string, double>> topLevel;
  double nestedUs = -1;  // every nested statement, per op
  std::vector<std::pair<std::string, double>> nested;
  double walSync = -1;  // pg_stat_wal.wal_sync per op
  double walWrite = -1;
  double walRecords = -1;  // pg_stat_wal.wal_records per op
  double walBytes = -1;    // pg_stat_wal.wal_bytes per op
};

class ServerProbe {
 public:
  // admin: a superuser-ish connection outside `db` (reads the statistics);
  // conninfo: the connection string of `db`.
  ServerProbe(PgConn& admin, const std::string& db,
              const std::string& conninfo);

  // The connection string the measured sessions must use: `conninfo` with
  // pg_stat_statements.track = 'all' as a startup option when this role may
  // set it.
  const std::string& sessionConninfo() const { return sessionConninfo_; }

  // session(n) opens its own connections to `db`, does n operations and
  // closes them. Runs it for two counts and divides the difference of the
  // server's counters by the difference of the counts, which cancels what a
  // session costs once (connect, prepare, initialize). Nothing else may use
  // `db` meanwhile.
  ServerCost perOp(int operations, const std::function<void(int n)>& session);

  // One line for the ratio column and one for the notes column.
  static std::string summary(const ServerCost& c);
  static std::string breakdown(const ServerCost& c);
  // Adds the figures to r.numbers (latest.json).
  static void addNumbers(const ServerCost& c, Result& r);

 private:
  struct Entry {
    std::string query;
    bool toplevel = true;
    double calls = 0, ms = 0;
  };
  struct Snapshot {
    std::map<std::string, Entry> entries;  // key: queryid, t / n (top-level)
    double walSync = 0, walWrite = 0, walRecords = 0, walBytes = 0;
  };
  Snapshot read();
  ServerCost diff(const Snapshot& a1, const Snapshot& b1, const Snapshot& a2,
                  const Snapshot& b2, int n1, int n2);

  PgConn& admin_;
  std::string db_, oid_;
  std::string sessionConninfo_;
  bool statements_ = false;
  bool trackAll_ = false;
  bool wal_ = false;
};

}  // namespace dlm_bench
