// upgrade_mixed_fleet: the rolling-upgrade rule under load.
//
// A fresh schema gets migrations V1..V2 only (the schema of the previous
// release, commit 7dcc93e), applied from migrations/postgres as a DBA would
// with psql, one transaction per file. Processes speaking that release's SQL
// (dlm_previous_release_worker) contend on the scenario's keys as a login
// role that has nothing but dlm_client. After a few seconds every migration
// newer than V2 in migrations/postgres is applied while they run; then
// processes of the new library (dlm_contention_worker) join them on the same
// keys. At the end the holds of both kinds, checked together by the
// contention checker (oracle::checkHolds), must show no overlap and fencing
// tokens growing in hold order; neither kind may have met an error other
// than retried transients; both must have acquired after the upgrade.
//
// With no migration newer than V2 in the tree the "upgrade" applies nothing
// and the test is a mixed-fleet run on V2; once V3 (and later ones) exist it
// applies them under load, which is the point.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "contender.h"
#include "hold_log.h"
#include "temp_dir.h"
#include "contention/scenario.h"
#include "support/pg_test_support.h"
#include "upgrade/previous_release_log.h"

extern char** environ;

namespace dlm::test::upgrade {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// The schema version of the previous release.
constexpr int kPreviousVersion = 2;
constexpr int kPreviousWorkers = 3;
constexpr int kPreviousThreads = 2;
constexpr int kNewWorkers = 2;
constexpr int kNewThreads = 2;
// Time for a batch of workers to start and connect before they contend.
constexpr auto kStartDelay = 1500ms;
// The previous release alone, before the upgrade.
constexpr auto kLoadBeforeUpgrade = 5s;
// Both kinds together, after it.
constexpr double kMixedSeconds = 10;
// The previous-release workers stop themselves by then whatever happens.
constexpr double kPreviousMaxSeconds = 90;
// A worker still running this long after it should have stopped is killed
// (and the test fails).
constexpr auto kGrace = 20s;
// "Around the migration": acquire calls within this of it.
constexpr auto kAround = 1s;
// A lock id outside the scenario, held by the previous release across the
// whole run (and so across the migration) and probed by its other threads.
constexpr const char* kLongKey = "upgrade-long";
// No acquire call of the previous release may take longer than its
// statement_timeout (5 s): a migration must not stall the old fleet.
constexpr double kMaxAcquireMs = 5000;

std::int64_t ns(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

double ms(std::int64_t nanoseconds) {
  return static_cast<double>(nanoseconds) / 1e6;
}

struct MigrationFile {
  int version = 0;
  std::string file;  // "V2__wait_graph_and_release_notify.sql"
  std::string sql;
};

// The source tree's migrations/postgres, or the directory named by
// DLM_TEST_PG_MIGRATIONS_DIR (to try a migration before it lands there).
std::string migrationsDir() {
  const char* dir = std::getenv("DLM_TEST_PG_MIGRATIONS_DIR");
  return dir != nullptr && *dir != '\0' ? dir : DLM_PG_MIGRATIONS_DIR;
}

// Every V<n>__<what>.sql in migrationsDir(), in version order.
std::vector<MigrationFile> migrationFiles() {
  static const std::regex kName(R"(V([0-9]+)__.+\.sql)");
  std::vector<MigrationFile> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(migrationsDir())) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, kName)) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    out.push_back({std::stoi(m[1].str()), name, text.str()});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  return out;
}

// One migration file as `psql -1 -f FILE` applies it with search_path set
// to the schema: the whole file in one transaction, which must record its
// version.
void applyMigration(pqxx::connection& admin, const std::string& schema,
                    const MigrationFile& m) {
  pqxx::work tx(admin);
  tx.exec("SET LOCAL search_path = " + tx.quote_name(schema));
  // Several statements, sent as one simple query (as psql -1 would).
  tx.exec(m.sql);
  const int recorded =
      tx.exec("SELECT max(version) FROM dlm_schema_version")[0][0].as<int>();
  if (recorded != m.version) {
    throw std::runtime_error(fmt::format("{} recorded version {}, not {}",
                                         m.file, recorded, m.version));
  }
  tx.commit();
}

// A worker process; killed by the destructor if still running (a failed
// assertion must not leave it behind).
class Child {
 public:
  Child(const char* program, std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The child inherits the environment: PG* variables name the server.
    const int rc =
        posix_spawn(&pid_, program, nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << program << ": " << std::strerror(rc);
      pid_ = -1;
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void stop() {
    if (pid_ > 0) kill(pid_, SIGTERM);
  }

  // Waits for the exit, killing the process at `killAt`. True when it ran
  // and exited with status 0; otherwise `problem` says why not.
  bool wait(Clock::time_point killAt, std::string* problem) {
    if (pid_ <= 0) {
      *problem = "not started";
      return false;
    }
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (r < 0 && errno != EINTR) {
        *problem = std::string("waitpid: ") + std::strerror(errno);
        pid_ = -1;
        return false;
      }
      if (Clock::now() >= killAt) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        pid_ = -1;
        *problem = "still running at its deadline: killed";
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    pid_ = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
    *problem = WIFEXITED(status)
                   ? fmt::format("exit status {}", WEXITSTATUS(status))
                   : fmt::format("killed by signal {}", WTERMSIG(status));
    return false;
  }

 private:
  pid_t pid_ = -1;
};

std::optional<oracle::ContendResult> readHolds(const std::string& path,
                                            std::string* problem) {
  std::ifstream in(path);
  return oracle::readResult(in, problem);
}

std::optional<PreviousReleaseStats> readStatsFile(const std::string& path,
                                                  std::string* problem) {
  std::ifstream in(path);
  return readStats(in, problem);
}

TEST(UpgradeMixedFleet, PreviousAndNewReleaseShareLocksSafelyAcrossAnUpgrade) {
  const std::vector<MigrationFile> files = migrationFiles();
  ASSERT_GE(files.size(), 2U) << "no migrations in " << migrationsDir();
  ASSERT_EQ(files[0].version, 1);
  ASSERT_EQ(files[1].version, kPreviousVersion);

  // The previous release's schema, as its DBA left it.
  FreshSchema schema;
  for (const auto& m : files) {
    if (m.version <= kPreviousVersion) {
      ASSERT_NO_THROW(applyMigration(schema.admin(), schema.name(), m))
          << m.file;
    }
  }
  // The application's login role: dlm_client and nothing else.
  ClientRole role(schema.admin());
  oracle::TempDir dir("dlm-upgrade");

  // The previous release, alone.
  const std::int64_t previousStart = oracle::steadyNowNs() + ns(kStartDelay);
  std::vector<std::unique_ptr<Child>> previous;
  std::vector<std::string> previousOuts, previousStats;
  for (int w = 0; w < kPreviousWorkers; ++w) {
    previousOuts.push_back(dir.file(fmt::format("previous-{}.holds", w)));
    previousStats.push_back(dir.file(fmt::format("previous-{}.stats", w)));
    std::vector<std::string> args{"dlm_previous_release_worker",
                                  "--conninfo",
                                  "user=" + role.name(),
                                  "--schema",
                                  schema.name(),
                                  "--worker",
                                  std::to_string(51 + w),
                                  "--threads",
                                  std::to_string(kPreviousThreads),
                                  "--start-at-ns",
                                  std::to_string(previousStart),
                                  "--max-seconds",
                                  fmt::format("{}", kPreviousMaxSeconds),
                                  "--out",
                                  previousOuts.back(),
                                  "--stats",
                                  previousStats.back(),
                                  "--long-key",
                                  kLongKey};
    if (w == 0) args.push_back("--long-holder");
    previous.push_back(
        std::make_unique<Child>(DLM_PREVIOUS_RELEASE_WORKER, std::move(args)));
  }

  // The upgrade, under their load: every migration newer than theirs.
  std::this_thread::sleep_until(
      Clock::time_point(std::chrono::nanoseconds(previousStart)) +
      kLoadBeforeUpgrade);
  std::vector<std::string> applied;
  const std::int64_t migrationStart = oracle::steadyNowNs();
  for (const auto& m : files) {
    if (m.version <= kPreviousVersion) continue;
    ASSERT_NO_THROW(applyMigration(schema.admin(), schema.name(), m)) << m.file;
    applied.push_back(m.file);
  }
  const std::int64_t migrationEnd = oracle::steadyNowNs();

  // The new library joins them.
  const std::int64_t newStart = oracle::steadyNowNs() + ns(kStartDelay);
  std::vector<std::unique_ptr<Child>> fresh;
  std::vector<std::string> freshOuts;
  for (int w = 0; w < kNewWorkers; ++w) {
    freshOuts.push_back(dir.file(fmt::format("new-{}.holds", w)));
    fresh.push_back(std::make_unique<Child>(
        DLM_CONTENTION_WORKER,
        std::vector<std::string>{
            "dlm_contention_worker", "--url",
            fmt::format("postgresql://{}@", role.name()), "--schema",
            schema.name(), "--worker", std::to_string(w + 1), "--threads",
            std::to_string(kNewThreads), "--attempts", "1000000", "--seconds",
            fmt::format("{}", kMixedSeconds), "--start-at-ns",
            std::to_string(newStart), "--out", freshOuts.back()}));
  }

  // The new workers end by themselves; then the old ones are told to stop.
  const auto newEnd = Clock::time_point(std::chrono::nanoseconds(newStart)) +
                      std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(kMixedSeconds));
  std::vector<oracle::Hold> allHolds;
  std::int64_t newHolds = 0, newAttempts = 0, newUnavailable = 0;
  for (int w = 0; w < kNewWorkers; ++w) {
    std::string problem;
    EXPECT_TRUE(
        fresh[static_cast<std::size_t>(w)]->wait(newEnd + kGrace, &problem))
        << "new-library worker " << w + 1 << ": " << problem;
    auto r = readHolds(freshOuts[static_cast<std::size_t>(w)], &problem);
    if (!r) {
      ADD_FAILURE() << "new-library worker " << w + 1 << ": " << problem;
      continue;
    }
    EXPECT_TRUE(r->error.empty())
        << "new-library worker " << w + 1 << ": " << r->error;
    EXPECT_EQ(r->failedReleases, 0) << "new-library worker " << w + 1;
    newHolds += static_cast<std::int64_t>(r->holds.size());
    newAttempts += r->attempts;
    newUnavailable += r->unavailable;
    allHolds.insert(allHolds.end(), r->holds.begin(), r->holds.end());
  }
  for (auto& c : previous) c->stop();
  const auto previousKillAt = Clock::now() + kGrace;

  std::int64_t oldBefore = 0, oldDuring = 0, oldAfter = 0, oldAttempts = 0;
  PreviousReleaseStats stats;
  for (int w = 0; w < kPreviousWorkers; ++w) {
    const auto i = static_cast<std::size_t>(w);
    std::string problem;
    EXPECT_TRUE(previous[i]->wait(previousKillAt, &problem))
        << "previous-release worker " << w << ": " << problem;
    auto r = readHolds(previousOuts[i], &problem);
    if (!r) {
      ADD_FAILURE() << "previous-release worker " << w << ": " << problem;
      continue;
    }
    EXPECT_TRUE(r->error.empty())
        << "previous-release worker " << w << ": " << r->error;
    EXPECT_EQ(r->failedReleases, 0) << "previous-release worker " << w;
    oldAttempts += r->attempts;
    for (const auto& h : r->holds) {
      if (h.endNs < migrationStart) {
        ++oldBefore;
      } else if (h.startNs > migrationEnd) {
        ++oldAfter;
      } else {
        ++oldDuring;
      }
    }
    allHolds.insert(allHolds.end(), r->holds.begin(), r->holds.end());
    auto s = readStatsFile(previousStats[i], &problem);
    if (!s) {
      ADD_FAILURE() << "previous-release worker " << w << ": " << problem;
      continue;
    }
    stats.merge(*s);
  }

  // One checker for both kinds: mutual exclusion and fencing order.
  const oracle::HoldReport report = oracle::checkHolds(allHolds, '.');
  std::string problems;
  for (const auto& line : oracle::describeProblems(report)) {
    problems += line + "\n";
  }
  EXPECT_EQ(report.overlapCount, 0) << problems;
  EXPECT_TRUE(report.fencingViolations.empty()) << problems;
  EXPECT_TRUE(report.failedReleases.empty()) << problems;

  // The previous release met no error but retried transients.
  std::string messages;
  for (const auto& m : stats.errorMessages) messages += m + "\n";
  EXPECT_EQ(stats.errors, 0) << messages;
  EXPECT_EQ(stats.deadlockCycles, 0);
  EXPECT_EQ(stats.extendsLost, 0);

  // Both kinds worked after the upgrade (and the old one before it).
  EXPECT_GT(oldBefore, 0) << "the previous release acquired nothing before";
  EXPECT_GT(oldAfter, 0) << "the previous release acquired nothing after";
  EXPECT_GT(newHolds, 0) << "the new library acquired nothing";
  // The lock held across the upgrade was not lost: one hold spanning the
  // migration, every extension found it still ours, its release answered
  // true, and every probe by the other threads was refused (a granted probe
  // would show as an overlap above).
  std::optional<oracle::Hold> longHold;
  for (const auto& h : allHolds) {
    // The holder thread logs as worker * 100 + 99.
    if (h.key == kLongKey && h.worker % 100 == 99) longHold = h;
  }
  ASSERT_TRUE(longHold.has_value()) << kLongKey << " was never held";
  EXPECT_LT(longHold->startNs, migrationStart);
  EXPECT_GT(longHold->endNs, migrationEnd);
  EXPECT_TRUE(longHold->released);
  EXPECT_GT(stats.longExtends, 0);

  std::map<std::string, oracle::KeySummary> byKey;
  for (const auto& k : report.keys) byKey[k.key] = k;
  for (const auto& k : contention::scenarioKeys()) {
    EXPECT_GE(byKey[k.id].holds, 1) << k.id << " was never acquired";
  }

  // The rows agree with the log: each key's fencing token is the last one
  // handed out (no acquisition lost or unlogged), and nothing is left held.
  {
    pqxx::work tx(schema.admin());
    for (const auto& k : report.keys) {
      const std::string resource = fmt::format("DC#{}#{}#{}", contention::kFarm,
                                               contention::kClient, k.key);
      const auto r = tx.exec_params("SELECT fencing_token, status FROM " +
                                        tx.quote_name(schema.name()) +
                                        ".dlm_locks WHERE resource = $1",
                                    resource);
      ASSERT_EQ(r.size(), 1U) << resource;
      EXPECT_EQ(r[0][0].as<std::int64_t>(), k.lastFencing) << resource;
      EXPECT_EQ(r[0][1].as<std::string>(), "FREE") << resource;
    }
  }

  // Latency of the previous release's acquire calls around the migration.
  double maxAround = 0, maxOverall = 0;
  const std::int64_t aroundFrom = migrationStart - ns(kAround);
  const std::int64_t aroundTo = migrationEnd + ns(kAround);
  for (const auto& a : stats.acquires) {
    const double d = ms(a.endNs - a.startNs);
    maxOverall = std::max(maxOverall, d);
    if (a.endNs >= aroundFrom && a.startNs <= aroundTo) {
      maxAround = std::max(maxAround, d);
    }
  }
  EXPECT_LT(maxOverall, kMaxAcquireMs);

  std::string retries;
  for (const auto& [state, n] : stats.retries) {
    retries += fmt::format(" {}={}", state, n);
  }
  std::string appliedText;
  for (const auto& f : applied)
    appliedText += (appliedText.empty() ? "" : ",") + f;
  std::printf(
      "[ upgrade ] V%d -> V%d (%s) in %.1f ms under load | previous release "
      "(%d procs x %d threads): %lld attempts, holds before/during/after "
      "%lld/%lld/%lld, max acquire %.1f ms within %lld s of the migration "
      "(%.1f ms overall), retried transients %lld%s, errors %lld, "
      "notifications %lld, lock held across the upgrade %.1f s (%lld "
      "extensions, %lld probes by other threads) | new library (%d procs x %d "
      "threads, "
      "after): "
      "%lld attempts, %lld holds, %lld unavailable | overlaps %lld, fencing "
      "violations %zu, keys %zu\n",
      kPreviousVersion, files.back().version,
      applied.empty() ? "no migration newer than V2 in migrations/postgres"
                      : appliedText.c_str(),
      ms(migrationEnd - migrationStart), kPreviousWorkers, kPreviousThreads,
      static_cast<long long>(oldAttempts), static_cast<long long>(oldBefore),
      static_cast<long long>(oldDuring), static_cast<long long>(oldAfter),
      maxAround,
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::seconds>(kAround).count()),
      maxOverall, static_cast<long long>(stats.totalRetries()), retries.c_str(),
      static_cast<long long>(stats.errors),
      static_cast<long long>(stats.notifications),
      ms(longHold->endNs - longHold->startNs) / 1000,
      static_cast<long long>(stats.longExtends),
      static_cast<long long>(stats.probes), kNewWorkers, kNewThreads,
      static_cast<long long>(newAttempts), static_cast<long long>(newHolds),
      static_cast<long long>(newUnavailable),
      static_cast<long long>(report.overlapCount),
      report.fencingViolations.size(), report.keys.size());
}

}  // namespace
}  // namespace dlm::test::upgrade
