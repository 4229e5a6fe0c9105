// dlm_release_stalls: does autovacuum stall releases? Threads contend for a
// few keys (so waiters keep inserting and deleting request rows, and
// autovacuum keeps finding dead tuples to clean and empty pages to cut off)
// and time every releaseLock. Two phases in one process on the same schema:
// the tables as the schema ships them (vacuum_truncate = off) and, as the
// baseline, with vacuum_truncate reset to PostgreSQL's default (on), whose
// ACCESS EXCLUSIVE lock for truncating blocked every release for about a
// second. Prints per phase: releases, p50/p99/max latency, releases over
// 100 ms, autovacuum runs.
//
//   dlm_release_stalls [--url postgresql://] [--seconds 180] [--threads 8]
//       [--keys 2] [--naptime 5]
//
// Needs a role that owns the schema it creates (the bench cluster's
// superuser); --naptime N sets autovacuum_naptime for the run (ALTER SYSTEM,
// reset afterwards; 0 leaves the server alone).
#include <fmt/format.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/store_url.h"

namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct PgCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Conn = std::unique_ptr<PGconn, PgCloser>;
using Result = std::unique_ptr<PGresult, ResultCloser>;

// The admin side of the bench: plain SQL on its own connection.
class Admin {
 public:
  explicit Admin(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      throw std::runtime_error(std::string("connect: ") +
                               PQerrorMessage(conn_.get()));
    }
  }
  std::string value(const std::string& sql) {
    Result r(PQexec(conn_.get(), sql.c_str()));
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
      throw std::runtime_error(sql + ": " + PQerrorMessage(conn_.get()));
    }
    return status == PGRES_TUPLES_OK && PQntuples(r.get()) > 0
               ? PQgetvalue(r.get(), 0, 0)
               : "";
  }

 private:
  Conn conn_;
};

struct Phase {
  std::string name;
  std::vector<double> releaseMs;
  long acquisitions = 0;
  long autovacuums = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

Phase runPhase(const std::string& name, dlm::DistributedLockManager& manager,
               Admin& admin, const std::string& schema, double seconds,
               int threads, int keys) {
  Phase phase{name, {}, 0, 0};
  const std::string autovacuums = fmt::format(
      "SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_user_tables "
      "WHERE schemaname = '{}'",
      schema);
  const long before = std::stol(admin.value(autovacuums));
  std::mutex mutex;
  std::atomic<long> acquisitions{0};
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919U + 1);
      std::vector<double> mine;
      while (Clock::now() < end) {
        dlm::Lock lock = manager.getLockInstance(
            fmt::format("stalls.key-{}", rng() % static_cast<unsigned>(keys)),
            dlm::LockLevel::DC);
        try {
          manager.acquireLock(lock, milliseconds(10000), milliseconds(2000));
        } catch (const dlm::DLMException&) {
          continue;  // timed out behind the others: a normal outcome here
        }
        ++acquisitions;
        std::this_thread::sleep_for(milliseconds(1));
        const auto start = Clock::now();
        manager.releaseLock(lock);
        mine.push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - start)
                .count());
      }
      std::lock_guard<std::mutex> guard(mutex);
      phase.releaseMs.insert(phase.releaseMs.end(), mine.begin(), mine.end());
    });
  }
  for (auto& th : pool) th.join();
  phase.acquisitions = acquisitions;
  // The statistics collector reports with a delay.
  std::this_thread::sleep_for(milliseconds(1000));
  phase.autovacuums = std::stol(admin.value(autovacuums)) - before;
  return phase;
}

void report(const Phase& p) {
  const auto over = std::count_if(p.releaseMs.begin(), p.releaseMs.end(),
                                  [](double ms) { return ms > 100; });
  fmt::print(
      "{:<34} releases {:>7}  p50 {:>6.2f} ms  p99 {:>6.2f} ms  max {:>8.1f} "
      "ms  >100 ms: {:>3}  autovacuum runs {}\n",
      p.name, p.releaseMs.size(), percentile(p.releaseMs, 0.5),
      percentile(p.releaseMs, 0.99), percentile(p.releaseMs, 1.0), over,
      p.autovacuums);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Release latency while autovacuum runs (see the file comment)"};
  std::string url = "postgresql://";
  double seconds = 180;
  int threads = 8;
  int keys = 2;
  int naptime = 5;
  app.add_option("--url", url, "database (a role that may create a schema)");
  app.add_option("--seconds", seconds, "length of each phase")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--threads", threads, "contending threads")
      ->check(CLI::Range(1, 256));
  app.add_option("--keys", keys, "keys they contend for")
      ->check(CLI::Range(1, 1000));
  app.add_option("--naptime", naptime,
                 "autovacuum_naptime in seconds for the run; 0: unchanged")
      ->check(CLI::Range(0, 600));
  CLI11_PARSE(app, argc, argv);

  try {
    Admin admin(url);
    admin.value("SET client_min_messages = warning");
    const std::string schema = fmt::format("dlm_stalls_{}", ::getpid());
    admin.value("CREATE SCHEMA " + schema);
    if (naptime > 0) {
      admin.value(
          fmt::format("ALTER SYSTEM SET autovacuum_naptime = {}", naptime));
      admin.value("SELECT pg_reload_conf()");
    }
    auto manager = dlm::DistributedLockManager::builder()
                       .clientId("stalls")
                       .farmId("bench")
                       .store(dlm::openStore(url, schema))
                       .applyMigrations(true)
                       .build();
    manager->initialize();
    const std::string tables =
        fmt::format("{0}.dlm_locks, {0}.dlm_lock_requests", schema);
    const auto setTruncate = [&](const char* clause) {
      for (const char* table : {"dlm_locks", "dlm_lock_requests"}) {
        admin.value(fmt::format("ALTER TABLE {}.{} {}", schema, table, clause));
      }
    };
    fmt::print(
        "{} threads on {} keys, {} s per phase, autovacuum_naptime {} "
        "s, tables {}\n",
        threads, keys, seconds, admin.value("SHOW autovacuum_naptime"), tables);
    std::vector<Phase> phases;
    // The schema as shipped first (its storage settings as migrated).
    phases.push_back(runPhase(
        fmt::format("as shipped ({})",
                    admin.value(fmt::format(
                        "SELECT coalesce(array_to_string(reloptions, ','), "
                        "'defaults') FROM pg_class WHERE oid = "
                        "'{}.dlm_lock_requests'::regclass",
                        schema))),
        *manager, admin, schema, seconds, threads, keys));
    setTruncate("RESET (vacuum_truncate)");
    phases.push_back(runPhase("baseline: vacuum_truncate default", *manager,
                              admin, schema, seconds, threads, keys));
    manager->destroy();
    for (const Phase& p : phases) report(p);
    const double shipped = percentile(phases[0].releaseMs, 1.0);
    const double baseline = percentile(phases[1].releaseMs, 1.0);
    fmt::print("max release latency, baseline / as shipped: {:.1f}x\n",
               shipped > 0 ? baseline / shipped : 0.0);
    if (naptime > 0) {
      admin.value("ALTER SYSTEM RESET autovacuum_naptime");
      admin.value("SELECT pg_reload_conf()");
    }
    admin.value("DROP SCHEMA " + schema + " CASCADE");
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlm_release_stalls: {}\n", e.what());
    return 1;
  }
  return 0;
}
