// The second process of the SQLite deadline and fault tests. It takes hold
// of something on a database file, prints one line to stdout when it holds
// it, and then holds it until its time is up or it is killed:
//
//   begin-immediate <file> <hold_ms>
//       BEGIN IMMEDIATE on a raw connection (the file's write lock), held
//       for hold_ms, then ROLLBACK. Prints "ready".
//   write-and-wait <file>
//       BEGIN IMMEDIATE, then enough uncommitted writes to dlm_locks that
//       SQLite spills dirty pages into the WAL before any COMMIT; prints
//       "ready <wal bytes>" and waits to be killed (it never commits).
//   hold-lock <file> <client> <lock id> <ttl_ms> [shared]
//       tryAcquireLock through the public DistributedLockManager API (XDC;
//       LockMode::SHARED with "shared"), prints "ready <fencing token>" and
//       waits to be killed.
//   handoff <file> <client> <lock id> <rounds> <hold_ms> <gap_ms> <wake 0|1>
//       The releasing side of a cross-process handoff, `rounds` times:
//       acquireLock (sleepBetweenRetries 1 ms), print "held", hold for
//       hold_ms, then print "released <steady clock ns>" (read just before
//       releaseLock) once released; then waits (up to gap_ms) until the
//       other side holds the lock before the next round; "done" at the end.
//       <wake> sets SqliteStoreOptions::wakeOtherProcesses. Another client id
//       than the waiter's would be another key: the test passes its own.
//
// Exit status 2 for bad arguments, 1 when taking hold failed (the reason on
// stderr).
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"

namespace {

struct Closer {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using Db = std::unique_ptr<sqlite3, Closer>;

Db open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    throw std::runtime_error("opening " + path + ": " + sqlite3_errstr(rc));
  }
  return db;
}

void exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(sql + ": " + message);
  }
}

// One line on stdout, flushed at once: the test is blocked reading it.
void ready(const std::string& detail = {}) {
  std::printf("ready%s%s\n", detail.empty() ? "" : " ", detail.c_str());
  std::fflush(stdout);
}

[[noreturn]] void waitToBeKilled() {
  for (;;) pause();
}

void beginImmediate(const std::string& path, long holdMs) {
  Db db = open(path);
  // A single attempt: this process is the one that is meant to hold the
  // lock, so it must not queue behind anyone.
  exec(db.get(), "BEGIN IMMEDIATE");
  ready();
  std::this_thread::sleep_for(std::chrono::milliseconds(holdMs));
  exec(db.get(), "ROLLBACK");
}

void writeAndWait(const std::string& path) {
  Db db = open(path);
  // A tiny page cache: the transaction's dirty pages no longer fit and are
  // written to the WAL (uncommitted frames), which is what a crash in the
  // middle of a large write leaves behind.
  exec(db.get(), "PRAGMA cache_size = 8");
  exec(db.get(), "BEGIN IMMEDIATE");
  exec(db.get(),
       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
       "WHERE i < 5000) "
       "INSERT INTO dlm_locks (resource, resource_crc) "
       "SELECT 'uncommitted#' || i || '#' || hex(randomblob(100)), i FROM n");
  std::error_code error;
  const auto wal = std::filesystem::file_size(path + "-wal", error);
  ready(std::to_string(error ? 0 : wal));
  waitToBeKilled();
}

void holdLock(const std::string& path, const std::string& client,
              const std::string& id, long ttlMs, dlm::LockMode mode) {
  dlm::SqliteStoreOptions options;
  options.path = path;
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId(client)
                     .store(std::make_shared<dlm::SqliteStore>(options))
                     .build();
  manager->initialize();
  dlm::Lock lock = manager->getLockInstance(id, dlm::LockLevel::XDC, mode);
  manager->tryAcquireLock(lock, std::chrono::milliseconds(ttlMs));
  ready(std::to_string(lock.fencingToken()));
  waitToBeKilled();
}

void handoff(const std::string& path, const std::string& client,
             const std::string& id, int rounds, long holdMs, long gapMs,
             bool wake) {
  dlm::SqliteStoreOptions options;
  options.path = path;
  options.wakeOtherProcesses = wake;
  dlm::LockConfiguration configuration;
  configuration.sleepBetweenRetries = std::chrono::milliseconds(1);
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId(client)
                     .store(std::make_shared<dlm::SqliteStore>(options))
                     .configuration(configuration)
                     .build();
  manager->initialize();
  dlm::Lock lock = manager->getLockInstance(id, dlm::LockLevel::XDC);
  for (int round = 0; round < rounds; ++round) {
    manager->acquireLock(lock, std::chrono::seconds(60),
                         std::chrono::seconds(60));
    ready("held");
    std::this_thread::sleep_for(std::chrono::milliseconds(holdMs));
    const auto start = std::chrono::steady_clock::now().time_since_epoch();
    manager->releaseLock(lock);
    // Wait for the other process to take it (up to gap_ms) before queueing
    // again: re-acquiring at once would win before any waiter woke.
    const auto gapEnd =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(gapMs);
    while (std::chrono::steady_clock::now() < gapEnd &&
           !manager->describeLock(lock)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::printf("released %lld\n",
                static_cast<long long>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(start)
                        .count()));
    std::fflush(stdout);
  }
  std::printf("done\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "begin-immediate" && argc == 4) {
      beginImmediate(argv[2], std::stol(argv[3]));
    } else if (mode == "write-and-wait" && argc == 3) {
      writeAndWait(argv[2]);
    } else if (mode == "hold-lock" &&
               (argc == 6 || (argc == 7 && std::string(argv[6]) == "shared"))) {
      holdLock(argv[2], argv[3], argv[4], std::stol(argv[5]),
               argc == 7 ? dlm::LockMode::SHARED : dlm::LockMode::EXCLUSIVE);
    } else if (mode == "handoff" && argc == 9) {
      handoff(argv[2], argv[3], argv[4], std::stoi(argv[5]), std::stol(argv[6]),
              std::stol(argv[7]), std::string(argv[8]) == "1");
    } else {
      std::fprintf(stderr,
                   "usage: %s begin-immediate <file> <hold_ms> | "
                   "write-and-wait <file> | "
                   "hold-lock <file> <client> <lock id> <ttl_ms> [shared] | "
                   "handoff <file> <client> <lock id> <rounds> <hold_ms> "
                   "<gap_ms> <wake 0|1>\n",
                   argv[0]);
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: %s\n", argv[0], mode.c_str(), e.what());
    return 1;
  }
  return 0;
}
