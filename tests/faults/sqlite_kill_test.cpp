// Time bounds under SQLite faults: real processes on a real file, killed with SIGKILL
// at the worst moments. SQLite must come back by itself (the kernel drops a
// dead process's file locks; WAL recovery ignores uncommitted frames), the
// others must carry on within their busy timeout, and a dead holder's lock
// must come free at its TTL and not before. Every wait here is bounded, so a
// regression fails the test instead of hanging it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "sqlite_child_process.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using test::codeOf;
using test::errorOf;

// What a bound may be overrun by: scheduling on a loaded 2-core machine and
// the sanitizer builds.
constexpr milliseconds kSlack{500};
// How long a helper process may take to start and take hold.
constexpr milliseconds kStartup{10000};

const std::string kClient = "faults";

milliseconds since(steady_clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

// Runs fn and returns how long it took.
template <typename Fn>
milliseconds timed(Fn&& fn) {
  const auto started = steady_clock::now();
  fn();
  return since(started);
}

bool killedBySigkill(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

class SqliteKillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The schema exists before any helper process opens the file.
    openStore(path_);
  }

  // A manager of this process on the file, as an application builds it.
  std::unique_ptr<DistributedLockManager> makeManager(
      milliseconds busyTimeout, LockConfiguration config = {}) {
    SqliteStoreOptions options;
    options.path = path_;
    options.busyTimeout = busyTimeout;
    config.sleepBetweenRetries = milliseconds(50);
    auto manager = DistributedLockManager::builder()
                       .clientId(kClient)
                       .store(std::make_shared<SqliteStore>(options))
                       .configuration(config)
                       .build();
    manager->initialize();
    return manager;
  }

  std::unique_ptr<ChildProcess> spawn(const std::vector<std::string>& args) {
    return std::make_unique<ChildProcess>(holderProgram(), args);
  }

  std::string integrity() {
    RawDb raw(path_);
    return raw.scalar("PRAGMA integrity_check");
  }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
};

TEST_F(SqliteKillTest,
       AProcessKilledInsideAWriteTransactionLeavesTheFileUsable) {
  const milliseconds busyTimeout(3000);
  auto manager = makeManager(busyTimeout);
  auto writer = spawn({"write-and-wait", path_});
  const auto line = writer->readLine(kStartup);
  ASSERT_TRUE(line && line->rfind("ready ", 0) == 0) << line.value_or("");
  std::printf("[ faults ] the writer left %s bytes of WAL, uncommitted\n",
              line->substr(6).c_str());

  // A waiter of this process queues behind the doomed transaction ...
  auto waiter = std::async(std::launch::async, [&] {
    Lock lock = manager->getLockInstance("waiting", LockLevel::XDC);
    const auto started = steady_clock::now();
    manager->tryAcquireLock(lock, seconds(30));
    const milliseconds took = since(started);
    manager->releaseLock(lock);
    return took;
  });
  std::this_thread::sleep_for(milliseconds(300));
  // ... and goes on as soon as the writer is gone: the kernel drops its
  // locks, and the uncommitted frames in the WAL are never read.
  const auto killedAt = steady_clock::now();
  EXPECT_TRUE(killedBySigkill(writer->killAndWait(SIGKILL)));
  const milliseconds waited = waiter.get();
  EXPECT_LT(waited.count(), busyTimeout.count());
  std::printf(
      "[ faults ] a waiter behind it took %lld ms, %lld ms after the "
      "kill\n",
      static_cast<long long>(waited.count()),
      static_cast<long long>(since(killedAt).count()));

  // Every call of another process goes on, each within the busy timeout.
  Lock lock = manager->getLockInstance("after.kill", LockLevel::XDC);
  EXPECT_LT(timed([&] { manager->tryAcquireLock(lock, seconds(30)); }).count(),
            busyTimeout.count());
  EXPECT_EQ(codeOf([&] {
              Lock other = manager->getLockInstance("after", LockLevel::XDC);
              manager->tryAcquireLock(other, seconds(30));
            }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_LT(timed([&] { EXPECT_TRUE(manager->releaseLock(lock)); }).count(),
            busyTimeout.count());
  EXPECT_LT(timed([&] {
              manager->acquireLock(lock, seconds(30), milliseconds(0));
            }).count(),
            busyTimeout.count());
  EXPECT_TRUE(manager->releaseLock(lock));
  // A new process, too.
  auto next = spawn({"hold-lock", path_, kClient, "after.kill", "30000"});
  EXPECT_EQ(next->readLine(kStartup).value_or("(nothing)"), "ready 3");

  EXPECT_EQ(integrity(), "ok");
  RawDb raw(path_);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM dlm_locks "
                       "WHERE resource LIKE 'uncommitted#%'"),
            "0");
}

TEST_F(SqliteKillTest, ALockOfAKilledProcessIsFreeAfterItsTtlAndNotBefore) {
  const milliseconds ttl(1500);
  const milliseconds busyTimeout(1000);
  const auto spawned = steady_clock::now();
  auto holder = spawn({"hold-lock", path_, kClient, "jobs.nightly",
                       std::to_string(ttl.count())});
  ASSERT_EQ(holder->readLine(kStartup).value_or("(nothing)"), "ready 1");
  EXPECT_TRUE(killedBySigkill(holder->killAndWait(SIGKILL)));
  // The holder took the lock after `spawned`, so it expires no earlier than
  // spawned + ttl (by the shared wall clock).
  auto manager = makeManager(busyTimeout);
  Lock lock = manager->getLockInstance("jobs.nightly", LockLevel::XDC);

  // Before the TTL: still held by the dead process.
  EXPECT_EQ(codeOf([&] { manager->tryAcquireLock(lock); }),
            ErrorCode::LOCK_UNAVAILABLE);
  const milliseconds triedAt = since(spawned);
  ASSERT_LT(triedAt, ttl) << "too slow to look before the TTL";
  // The same from another process.
  auto other = spawn({"hold-lock", path_, kClient, "jobs.nightly", "30000"});
  EXPECT_EQ(other->readLine(kStartup), std::nullopt);
  const int status = other->wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)  // it threw
      << status;
  if (since(spawned) >= ttl) {
    ADD_FAILURE() << "the other process looked after the TTL: inconclusive";
  }

  // After the TTL: taken right away by a waiting acquireLock.
  manager->acquireLock(lock, seconds(30), ttl + seconds(5));
  const milliseconds takenAt = since(spawned);
  EXPECT_GE(takenAt.count(),
            (ttl - milliseconds(2)).count());  // wall clock ms rounding
  EXPECT_LT(takenAt.count(),
            (ttl + kSlack + kSlack).count());  // startup + polling + slack
  EXPECT_EQ(lock.fencingToken(), 2);
  std::printf(
      "[ faults ] ttl %lld ms: the dead holder's lock was taken "
      "%lld ms after its process started\n",
      static_cast<long long>(ttl.count()),
      static_cast<long long>(takenAt.count()));
  EXPECT_TRUE(manager->releaseLock(lock));
  EXPECT_EQ(integrity(), "ok");
}

// The report: another process holding BEGIN IMMEDIATE made
// acquireLock with timeout 0 take 20.4 s (busy timeout 5 s x 4 tries). The
// manager opens a DeadlineScope(operationTimeout) around each attempt, and
// the store's busy wait ends at that deadline.
TEST_F(SqliteKillTest,
       AcquireLockWithTimeoutZeroEndsWithinTheOperationTimeout) {
  LockConfiguration config;
  config.operationTimeout = milliseconds(1000);
  auto manager = makeManager(seconds(5), config);
  Lock lock = manager->getLockInstance("blocked", LockLevel::XDC);
  auto blocker = spawn({"begin-immediate", path_, "60000"});
  ASSERT_EQ(blocker->readLine(kStartup).value_or("(nothing)"), "ready");

  const auto started = steady_clock::now();
  const DLMException e = errorOf(
      [&] { manager->acquireLock(lock, seconds(30), milliseconds(0)); });
  const milliseconds took = since(started);
  EXPECT_TRUE(e.code() == ErrorCode::RETRIES_EXHAUSTED ||
              e.code() == ErrorCode::CONNECTION_ERROR)
      << e.what();
  // Needs the manager side of the time bounds (a DeadlineScope per store
  // call).
  EXPECT_LT(took.count(), (config.operationTimeout + seconds(1)).count());
  std::printf(
      "[ faults ] acquireLock(timeout 0), operationTimeout 1000 ms, "
      "busy timeout 5000 ms, file held by another process: %lld ms\n",
      static_cast<long long>(took.count()));

  // Once the other process is gone (killed inside its transaction), the
  // same manager carries on.
  EXPECT_TRUE(killedBySigkill(blocker->killAndWait(SIGKILL)));
  manager->acquireLock(lock, seconds(30), milliseconds(0));
  EXPECT_TRUE(manager->releaseLock(lock));
}

}  // namespace
}  // namespace dlm::sqlite_test
