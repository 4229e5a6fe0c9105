// Measures how long write transactions wait for the SQLite write lock when
// several processes cycle acquire/release on a few keys of one file. Not a
// test (ctest does not run it; numbers depend on the machine):
//
//   dlm_sqlite_busy_bench MODE FILE [PROCESSES=4] [SECONDS=5]
//
// MODE default: SQLite's sqlite3_busy_timeout (what dlm replaced);
//      handler: dlm's BusyWait (the store's handler).
// Both run the same transactions through the store's own Connection layer
// and record, per transaction, the time from the BEGIN IMMEDIATE attempt to
// obtaining the lock. MODE store runs SqliteStore::tryAcquire / release and
// records each whole call instead.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/sqlite_store.h"
#include "sqlite/sqlite_connection.h"

namespace {

using Clock = std::chrono::steady_clock;
using dlm::internal::sqlite::Connection;
using dlm::internal::sqlite::Durability;
using dlm::internal::sqlite::Statement;
using dlm::internal::sqlite::Transaction;

constexpr std::chrono::milliseconds kBusyTimeout{5000};
constexpr int kKeys = 4;

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

std::int64_t wallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Outcome {
  std::vector<double> waits;  // microseconds
  long acquisitions = 0;
  long failures = 0;  // DLMExceptions (busy timeouts)
};

// The store's acquire and release as raw transactions, so only the busy
// handling differs between modes.
void cycleRaw(Connection& c, const std::string& key, const std::string& token,
              Outcome& out) {
  const std::int64_t now = wallMs();
  auto started = Clock::now();
  Transaction acquire(c, Durability::kDurable);
  out.waits.push_back(micros(Clock::now() - started));
  c.statement(
       "INSERT OR IGNORE INTO dlm_locks (resource, resource_crc) "
       "VALUES (?1, 0)")
      .bind(1, key)
      .run();
  bool free = false;
  {
    Statement row = c.statement(
        "SELECT status, expires_at_ms FROM dlm_locks WHERE resource = ?1");
    row.bind(1, key);
    free = row.step() && !(row.text(0) == "HELD" && row.integer(1) > now);
  }
  if (free) {
    c.statement(
         "UPDATE dlm_locks SET status = 'HELD', token = ?2, "
         "fencing_token = fencing_token + 1, expires_at_ms = ?3 "
         "WHERE resource = ?1")
        .bind(1, key)
        .bind(2, token)
        .bind(3, now + 10000)
        .run();
  }
  acquire.commit();
  if (!free) return;
  ++out.acquisitions;
  started = Clock::now();
  Transaction release(c, Durability::kLazy);
  out.waits.push_back(micros(Clock::now() - started));
  c.statement(
       "UPDATE dlm_locks SET status = 'FREE' WHERE resource = ?1 AND token = "
       "?2")
      .bind(1, key)
      .bind(2, token)
      .run();
  release.commit();
}

Outcome runWorker(const std::string& mode, const std::string& path,
                  double seconds) {
  Outcome out;
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  std::unique_ptr<dlm::SqliteStore> store;
  std::unique_ptr<Connection> raw;
  if (mode == "store") {
    store = std::make_unique<dlm::SqliteStore>(
        dlm::SqliteStoreOptions{path, kBusyTimeout});
  } else {
    raw = std::make_unique<Connection>(path, kBusyTimeout);
    // Replaces dlm's handler with SQLite's sleep-and-retry.
    if (mode == "default") {
      sqlite3_busy_timeout(raw->handle(),
                           static_cast<int>(kBusyTimeout.count()));
    }
  }
  const dlm::Holder holder{"bench", getpid()};
  for (long n = 0; Clock::now() < end; ++n) {
    const std::string key = "key-" + std::to_string(rng() % kKeys);
    const std::string token =
        std::to_string(getpid()) + "-" + std::to_string(n);
    try {
      if (raw) {
        cycleRaw(*raw, key, token, out);
        continue;
      }
      const dlm::StoreKey storeKey{key, {}, "", ""};
      auto started = Clock::now();
      const auto result = store->tryAcquire(
          {storeKey, "bench", token, std::chrono::seconds(10), holder});
      out.waits.push_back(micros(Clock::now() - started));
      if (!result.acquired) continue;
      ++out.acquisitions;
      started = Clock::now();
      store->release(storeKey, token, dlm::LockMode::EXCLUSIVE);
      out.waits.push_back(micros(Clock::now() - started));
    } catch (const dlm::DLMException& e) {
      // A busy timeout is a result here, counted and reported.
      ++out.failures;
    }
  }
  return out;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i =
      static_cast<std::size_t>(p * static_cast<double>(sorted.size()));
  return sorted[std::min(sorted.size() - 1, i)];
}

void printLine(const char* label, std::vector<double> waits, long acquisitions,
               long failures) {
  std::sort(waits.begin(), waits.end());
  std::printf(
      "%-8s tx=%-7zu acquisitions=%-6ld busy-failures=%-3ld wait p50=%.0fus "
      "p99=%.0fus p99.9=%.0fus max=%.0fus\n",
      label, waits.size(), acquisitions, failures, percentile(waits, 0.5),
      percentile(waits, 0.99), percentile(waits, 0.999),
      waits.empty() ? 0.0 : waits.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s default|handler|store FILE [PROCESSES] [SECONDS]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const int processes = argc > 3 ? std::atoi(argv[3]) : 4;
  const double seconds = argc > 4 ? std::atof(argv[4]) : 5.0;
  if (mode != "default" && mode != "handler" && mode != "store") {
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::remove((path + suffix).c_str());  // a fresh file per run
  }
  dlm::SqliteStore(dlm::SqliteStoreOptions{path, kBusyTimeout})
      .initialize(/*applyMigrations=*/true);

  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      // Child: write "acquisitions failures" then one wait per line.
      Outcome out;
      try {
        out = runWorker(mode, path, seconds);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %d failed: %s\n", i, e.what());
        std::_Exit(1);
      }
      std::ofstream file(path + ".waits" + std::to_string(i));
      file << out.acquisitions << ' ' << out.failures << '\n';
      for (const double w : out.waits) file << w << '\n';
      file.close();  // _Exit runs no destructors: flush before it
      std::_Exit(file ? 0 : 1);
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (const pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }

  std::printf("mode=%s processes=%d seconds=%.1f\n", mode.c_str(), processes,
              seconds);
  std::vector<double> all;
  long acquisitions = 0;
  long failures = 0;
  for (int i = 0; i < processes; ++i) {
    const std::string name = path + ".waits" + std::to_string(i);
    std::ifstream file(name);
    long a = 0;
    long f = 0;
    file >> a >> f;
    std::vector<double> waits;
    for (double w; file >> w;) waits.push_back(w);
    std::remove(name.c_str());
    printLine(("proc " + std::to_string(i)).c_str(), waits, a, f);
    all.insert(all.end(), waits.begin(), waits.end());
    acquisitions += a;
    failures += f;
  }
  printLine("ALL", all, acquisitions, failures);
  if (failed > 0) std::printf("%d process(es) failed\n", failed);
  return failed > 0 ? 1 : 0;
}
