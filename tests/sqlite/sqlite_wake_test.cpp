// Cross-process wake-up on one SQLite file (sqlite/release_wake_file.h): a release in
// one process ends the sleep of a waiter in another, and without the wake
// file the waiter still gets the lock by polling.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "sqlite_child_process.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CrossProcessWake : public ::testing::Test {
 protected:
  std::string path() const { return (dir_.path() / "locks.db").string(); }

  std::unique_ptr<DistributedLockManager> waiter(milliseconds sleep,
                                                 bool wake) {
    SqliteStoreOptions options;
    options.path = path();
    options.wakeOtherProcesses = wake;
    LockConfiguration configuration;
    configuration.sleepBetweenRetries = sleep;
    auto manager = DistributedLockManager::builder()
                       .clientId("wake-test")
                       .store(std::make_shared<SqliteStore>(options))
                       .configuration(configuration)
                       .applyMigrations(true)
                       .build();
    manager->initialize();
    return manager;
  }

  // `rounds` handoffs from a holder process to `manager`; returns each
  // one's time from the holder's releaseLock to our acquireLock returning.
  std::vector<double> handoffs(DistributedLockManager& manager, int rounds,
                               bool holderWakes) {
    ChildProcess holder(holderProgram(), {"handoff", path(), "wake-test", "x",
                                          std::to_string(rounds), "300",
                                          "10000", holderWakes ? "1" : "0"});
    Lock lock = manager.getLockInstance("x", LockLevel::XDC);
    std::vector<double> seconds;
    for (int round = 0; round < rounds; ++round) {
      const auto held = holder.readLine(std::chrono::seconds(20));
      EXPECT_EQ(held, std::optional<std::string>("ready held"));
      if (held != std::optional<std::string>("ready held")) break;
      const std::int64_t heldRead = steadyNs();
      // Fails once (held), then sleeps until woken or sleepBetweenRetries.
      manager.acquireLock(lock, std::chrono::seconds(60),
                          std::chrono::seconds(20));
      const std::int64_t acquired = steadyNs();
      const auto released = holder.readLine(std::chrono::seconds(5));
      EXPECT_TRUE(released && released->rfind("released ", 0) == 0);
      if (!released || released->rfind("released ", 0) != 0) break;
      const std::int64_t start = std::stoll(released->substr(9));
      seconds.push_back((acquired - start) / 1e9);
      std::printf("handoff %d: %.3f ms (held read %.3f ms before release)\n",
                  round, seconds.back() * 1e3, (start - heldRead) / 1e6);
      EXPECT_TRUE(manager.releaseLock(lock));
    }
    EXPECT_EQ(holder.readLine(std::chrono::seconds(20)),
              std::optional<std::string>("done"));
    EXPECT_EQ(holder.wait(), 0);
    return seconds;
  }

  TempDir dir_;
};

TEST_F(CrossProcessWake,
       AReleaseWakesAWaiterInAnotherProcessLongBeforeItsPoll) {
  auto manager = waiter(seconds(5), true);
  const auto latencies = handoffs(*manager, 4, true);
  ASSERT_EQ(latencies.size(), 4u);
  for (double s : latencies) {
    // The poll would take ~4.7 s (5 s sleep, release 300 ms into it).
    EXPECT_LT(s, 2.0);
    EXPECT_GT(s, 0.0);
  }
  // The waiter's subscribe created the wake file, with the database's mode.
  struct stat database {
  }, wake{};
  ASSERT_EQ(::stat(path().c_str(), &database), 0);
  ASSERT_EQ(::stat((path() + "-dlmwake").c_str(), &wake), 0);
  EXPECT_EQ(wake.st_mode & 0777, database.st_mode & 0777);
}

TEST_F(CrossProcessWake,
       WithoutTheWakeMechanismTheWaiterStillGetsTheLockByPolling) {
  auto manager = waiter(seconds(1), false);
  const auto latencies = handoffs(*manager, 2, false);
  ASSERT_EQ(latencies.size(), 2u);
  for (double s : latencies) {
    // Release 300 ms into a 1 s sleep: woken by the poll, ~0.7 s later.
    EXPECT_GT(s, 0.3);
    EXPECT_LT(s, 3.0);
  }
  EXPECT_FALSE(std::filesystem::exists(path() + "-dlmwake"));
}

TEST_F(CrossProcessWake, AnUnusableWakeFileLeavesPollingAndNeverFailsARelease) {
  // A directory where the wake file would be: neither side can use it.
  {
    auto manager = waiter(seconds(1), true);  // creates the database
  }
  std::filesystem::create_directory(path() + "-dlmwake");
  auto manager = waiter(seconds(1), true);
  const auto latencies = handoffs(*manager, 2, true);
  ASSERT_EQ(latencies.size(), 2u);
  for (double s : latencies) {
    EXPECT_GT(s, 0.3);
    EXPECT_LT(s, 3.0);
  }
}

TEST_F(CrossProcessWake, ReadOnlyCallsAndReleasesNeverCreateTheWakeFile) {
  auto manager = waiter(seconds(1), true);
  Lock lock = manager->getLockInstance("y", LockLevel::XDC);
  manager->tryAcquireLock(lock);
  EXPECT_TRUE(manager->releaseLock(lock));
  SqliteStoreOptions options;
  options.path = path();
  SqliteStore reader(options);
  (void)reader.schemaState();
  EXPECT_FALSE(std::filesystem::exists(path() + "-dlmwake"));
}

TEST_F(CrossProcessWake, AnInMemoryStoreSubscribesWithoutAFile) {
  SqliteStoreOptions options;
  options.path = ":memory:";
  SqliteStore store(options);
  store.initialize(true);
  struct Listener : ReleaseListener {
    void released(std::string_view) override { ++count; }
    void missedReleases() override {}
    int count = 0;
  } listener;
  ASSERT_TRUE(store.subscribeReleases(&listener));
  std::string token;
  const StoreKey key = pathKey("XDC#", "m");
  ASSERT_TRUE(acquire(store, key, seconds(30), &token).acquired);
  EXPECT_TRUE(store.release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(listener.count, 1);  // in-process delivery, no watcher
  store.unsubscribeReleases(&listener);
  EXPECT_FALSE(std::filesystem::exists(":memory:-dlmwake"));
}

}  // namespace
}  // namespace dlm::sqlite_test
