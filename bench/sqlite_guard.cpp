// What a guard costs on SQLite (issue 24): the application's own transaction
//   BEGIN IMMEDIATE; guardWithin(lock, tx); UPDATE one row; COMMIT
// against the same transaction without guardWithin, interleaved, on the
// application's own sqlite3 connection to the store's file (cached
// statements). The guard is one read in the transaction: no write, no
// commit of its own.
#include <dlm/sqlite_store.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads.h"

namespace dlm_bench {

namespace {

constexpr std::chrono::hours kHeldTtl{1};

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  throw std::runtime_error(
      fmt::format("sqlite: {}: {}", what, sqlite3_errmsg(db)));
}

// The application's connection to `path`, its statements, its row and
// (guarded) a DC lock "guard" held for the worker's life through `m`.
class AppWorker {
 public:
  AppWorker(const std::string& path, dlm::DistributedLockManager* m) : m_(m) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) !=
        SQLITE_OK) {
      fail(db_, "open " + path);
    }
    sqlite3_busy_timeout(db_, 5000);
    begin_ = prepare("BEGIN IMMEDIATE");
    update_ = prepare("UPDATE bench_app SET n = n + 1 WHERE id = 0");
    commit_ = prepare("COMMIT");
    if (m_ != nullptr) {
      lock_.emplace(m_->getLockInstance("guard", dlm::LockLevel::DC));
      m_->tryAcquireLock(*lock_, kHeldTtl);
    }
  }
  AppWorker(const AppWorker&) = delete;
  AppWorker& operator=(const AppWorker&) = delete;
  ~AppWorker() {
    if (m_ != nullptr) {
      try {
        m_->releaseLock(*lock_);
      } catch (const std::exception&) {
        // The run is over; the lease ends by itself.
      }
    }
    for (sqlite3_stmt* s : {begin_, update_, commit_}) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }

  void transaction() {
    step(begin_);
    try {
      if (m_ != nullptr) m_->guardWithin(*lock_, dlm::SqliteTransaction(db_));
      step(update_);
      if (sqlite3_changes(db_) != 1) fail(db_, "bench_app: no row");
      step(commit_);
    } catch (...) {
      if (sqlite3_get_autocommit(db_) == 0) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      throw;
    }
  }

 private:
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) {
      fail(db_, sql);
    }
    return s;
  }
  void step(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) fail(db_, sqlite3_sql(s));
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt *begin_ = nullptr, *update_ = nullptr, *commit_ = nullptr;
  dlm::DistributedLockManager* m_;
  std::optional<dlm::Lock> lock_;
};

std::unique_ptr<dlm::DistributedLockManager> makeManager(
    const std::string& path, bool migrate) {
  dlm::SqliteStoreOptions o;
  o.path = path;
  auto m = dlm::DistributedLockManager::builder()
               .clientId("lib")
               .farmId("bench")
               .store(std::make_shared<dlm::SqliteStore>(o))
               .applyMigrations(migrate)
               .build();
  m->initialize();
  return m;
}

// A fresh file with dlm's schema and the application's table of one row;
// returns the application connection's synchronous setting.
std::string freshFile(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove((path + suffix).c_str());
  }
  makeManager(path, true)->destroy();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) !=
      SQLITE_OK) {
    fail(db, "open " + path);
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned(db, sqlite3_close_v2);
  if (sqlite3_exec(db,
                   "CREATE TABLE bench_app (id INTEGER PRIMARY KEY, n INTEGER "
                   "NOT NULL); INSERT INTO bench_app VALUES (0, 0)",
                   nullptr, nullptr, nullptr) != SQLITE_OK) {
    fail(db, "creating bench_app");
  }
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA synchronous", -1, &s, nullptr);
  std::string level = "?";
  if (sqlite3_step(s) == SQLITE_ROW) {
    static const char* const kNames[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
    const int v = sqlite3_column_int(s, 0);
    level = v >= 0 && v <= 3 ? kNames[v] : std::to_string(v);
  }
  sqlite3_finalize(s);
  return level;
}

}  // namespace

void runGuardSqlite(const Flags& f, Report& report) {
  mkdir(f.sqliteDir.c_str(), 0755);
  const std::string path = f.sqliteDir + "/guard.sqlite";
  const std::string synchronous = freshFile(path);
  auto manager = makeManager(path, false);
  const std::vector<RunStats> runs =
      interleaved(2, f.rounds, f.seconds, f.warmup,
                  [&](int variant, double seconds, double warmup) {
                    return timedRun(1, seconds, warmup, [&](int) -> Operation {
                      auto worker = std::make_shared<AppWorker>(
                          path, variant == 0 ? manager.get() : nullptr);
                      return [worker] {
                        worker->transaction();
                        return 0;
                      };
                    });
                  });
  manager->destroy();
  const RunStats &guarded = runs[0], &unguarded = runs[1];
  const double ratio = guarded.opsPerSec() / unguarded.opsPerSec();
  const double p50Us =
      guarded.latency.percentileUs(50) - unguarded.latency.percentileUs(50);
  Result r = resultOf("guard", "sqlite", "threads=1", guarded, "cpu_us_per_op");
  r.ratio = fmt::format("{:.2f}x unguarded", ratio);
  r.extra = fmt::format(
      "BEGIN IMMEDIATE; guardWithin (a SELECT of the hold); UPDATE one row of "
      "bench_app; COMMIT, on the application's own sqlite3 connection "
      "(synchronous = {}, WAL); p50 {:+.1f} us against unguarded; process CPU "
      "{:.0f} us/tx (unguarded: {:.0f})",
      synchronous, p50Us, guarded.cpuUsPerOp(), unguarded.cpuUsPerOp());
  r.numbers["ratio_unguarded"] = ratio;
  report.add(r);
  Result b = resultOf("guard.base_unguarded", "sqlite", "threads=1", unguarded,
                      "cpu_us_per_op");
  b.extra =
      "the same transaction without guardWithin: BEGIN IMMEDIATE; UPDATE; "
      "COMMIT";
  report.add(b);
}

}  // namespace dlm_bench
