// Two processes on one SQLite file: opposite waits registered at the same
// moment (serialised by the file's write lock) and SHARED holds of one key
// by both. The rules themselves are in tests/store_contract.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "dlm/dlm.h"
#include "dlm/error.h"
#include "sqlite_child_process.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::seconds;

const std::string kScope = "DC#farm#client#";

class SqliteTwoProcesses : public ::testing::Test {
 protected:
  void SetUp() override { store_ = openStore(path_); }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  std::unique_ptr<SqliteStore> store_;
};

// Two processes, each with its own store, register opposite waits at the
// same moment, round after round: registrations are serialised by the file's
// write lock, so in every round exactly one of them sees the cycle.
TEST_F(SqliteTwoProcesses, OppositeWaitsFromTwoProcessesGiveExactlyOneCycle) {
  constexpr int kRounds = 200;
  auto k1 = [](int r) {
    return pathKey(kScope, "r" + std::to_string(r) + ".one");
  };
  auto k2 = [](int r) {
    return pathKey(kScope, "r" + std::to_string(r) + ".two");
  };
  auto parentOwner = [](int r) { return "parent-" + std::to_string(r); };
  auto childOwner = [](int r) { return "child-" + std::to_string(r); };
  for (int r = 0; r < kRounds; ++r) {
    ASSERT_TRUE(acquire(*store_, k1(r), seconds(300), nullptr, parentOwner(r))
                    .acquired);
    ASSERT_TRUE(
        acquire(*store_, k2(r), seconds(300), nullptr, childOwner(r)).acquired);
  }
  store_.reset();  // no connection crosses the fork

  int toChild[2];
  int toParent[2];
  ASSERT_EQ(pipe(toChild), 0);
  ASSERT_EQ(pipe(toParent), 0);
  const std::string childResults = dir_.file("child-results");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  // Both sides: meet the other at the start of each round, then register.
  auto run = [&](int sendFd, int receiveFd, const std::string& results,
                 bool parent) {
    auto store = openStore(path_);
    std::ofstream out(results);
    for (int r = 0; r < kRounds; ++r) {
      char byte = 'r';
      if (write(sendFd, &byte, 1) != 1 || read(receiveFd, &byte, 1) != 1) {
        throw std::runtime_error("the other process is gone");
      }
      const StoreKey key = parent ? k2(r) : k1(r);
      const std::string owner = parent ? parentOwner(r) : childOwner(r);
      const bool cycle =
          !store->registerWait(WaitRequest{key, owner, seconds(300)})
               .deadlockCycle.empty();
      out << (cycle ? 1 : 0) << "\n";
    }
  };
  if (pid == 0) {
    // Child: no gtest assertions; report through a file and the exit code.
    close(toChild[1]);
    close(toParent[0]);
    int status = 0;
    try {
      run(toParent[1], toChild[0], childResults, false);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      status = 1;
    }
    _exit(status);
  }
  close(toChild[0]);
  close(toParent[1]);
  const std::string parentResults = dir_.file("parent-results");
  EXPECT_NO_THROW(run(toChild[1], toParent[0], parentResults, true));
  // Closing our ends ends a child still waiting for us (it reads EOF).
  close(toChild[1]);
  close(toParent[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  std::ifstream parentIn(parentResults);
  std::ifstream childIn(childResults);
  int both = 0;
  int neither = 0;
  int parentCycles = 0;
  for (int r = 0; r < kRounds; ++r) {
    int p = -1;
    int c = -1;
    ASSERT_TRUE(parentIn >> p) << "round " << r;
    ASSERT_TRUE(childIn >> c) << "round " << r;
    both += p == 1 && c == 1;
    neither += p == 0 && c == 0;
    parentCycles += p;
  }
  EXPECT_EQ(both, 0);
  EXPECT_EQ(neither, 0);
  // Which side loses depends on timing; report it for the curious.
  std::printf("parent saw the cycle in %d of %d rounds\n", parentCycles,
              kRounds);
}

TEST_F(SqliteTwoProcesses, TwoProcessesHoldOneKeySharedAtOnce) {
  // The other process takes SHARED through the public API and keeps it.
  ChildProcess child(holderProgram(), {"hold-lock", path_, "shared-client",
                                       "reports.daily", "60000", "shared"});
  const auto line = child.readLine(seconds(20));
  ASSERT_TRUE(line.has_value()) << "the child did not report";
  ASSERT_EQ(line->rfind("ready ", 0), 0U) << *line;
  const std::int64_t childToken = std::stoll(line->substr(6));

  auto manager =
      DistributedLockManager::builder()
          .clientId("shared-client")
          .store(std::make_shared<SqliteStore>(SqliteStoreOptions{path_}))
          .build();
  manager->initialize();
  Lock reader = manager->getLockInstance("reports.daily", LockLevel::XDC,
                                         LockMode::SHARED);
  manager->tryAcquireLock(reader, seconds(30));
  EXPECT_GT(reader.fencingToken(), childToken);
  const auto holders = manager->describeHolders(reader);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].holder.pid, child.pid());
  EXPECT_EQ(holders[1].holder.pid, getpid());
  for (const auto& h : holders) EXPECT_EQ(h.mode, LockMode::SHARED);
  // A writer is refused while both read.
  Lock writer = manager->getLockInstance("reports.daily", LockLevel::XDC);
  try {
    manager->tryAcquireLock(writer, seconds(30));
    FAIL() << "an EXCLUSIVE lock was granted over two SHARED holders";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
  }
  manager->releaseLock(reader);
  child.killAndWait(SIGKILL);
}

}  // namespace
}  // namespace dlm::sqlite_test
