// Time bounds, SQLite side: no store call waits past the caller's deadline
// (dlm/deadline.h) or, without one, past the store's busy timeout, whether it
// waits for the file's write lock held by another process or for the store's
// connection held by another thread of this process.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"
#include "sqlite_child_process.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using test::errorOf;

const std::string kScope = "DC#farm#client#";

// What a bound may be overrun by: scheduling on a loaded 2-core machine and
// the sanitizer builds, never a whole busy timeout.
constexpr milliseconds kSlack{500};

milliseconds since(steady_clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady_clock::now() - start);
}

bool contains(const DLMException& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

class SqliteDeadlineTest : public ::testing::Test {
 protected:
  // Another process takes the file's write lock (BEGIN IMMEDIATE) for
  // `hold` and keeps it; the test's store objects must wait for it.
  std::unique_ptr<ChildProcess> holdWriteLock(milliseconds hold) {
    auto child = std::make_unique<ChildProcess>(
        holderProgram(),
        std::vector<std::string>{"begin-immediate", path_,
                                 std::to_string(hold.count())});
    const auto line = child->readLine(std::chrono::seconds(10));
    EXPECT_EQ(line.value_or("(nothing)"), "ready");
    return child;
  }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
};

TEST_F(SqliteDeadlineTest, ABusyWaitEndsAtTheCallersDeadlineNotTheBusyTimeout) {
  auto store = openStore(path_, std::chrono::seconds(5));
  auto holder = holdWriteLock(std::chrono::seconds(30));

  const auto started = steady_clock::now();
  const DLMException e = errorOf([&] {
    const DeadlineScope scope(deadlineAfter(milliseconds(300)));
    acquire(*store, pathKey(kScope, "x"));
  });
  const milliseconds waited = since(started);
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_TRUE(contains(e, "the call's deadline")) << e.what();
  EXPECT_GE(waited.count(),
            milliseconds(290).count());  // it did wait for the lock
  EXPECT_LT(waited.count(), (milliseconds(300) + kSlack).count());
  std::printf(
      "[ deadline ] 300 ms deadline, busy timeout 5000 ms: failed "
      "after %lld ms\n",
      static_cast<long long>(waited.count()));

  // The same store works once the other process is gone.
  holder->killAndWait(SIGKILL);
  EXPECT_TRUE(acquire(*store, pathKey(kScope, "x")).acquired);
}

TEST_F(SqliteDeadlineTest, WithoutADeadlineACallFailsWithinTheBusyTimeout) {
  const milliseconds busyTimeout(1000);
  auto store = openStore(path_, busyTimeout);
  auto holder = holdWriteLock(std::chrono::seconds(30));

  const auto started = steady_clock::now();
  const DLMException e =
      errorOf([&] { acquire(*store, pathKey(kScope, "x")); });
  const milliseconds waited = since(started);
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_TRUE(contains(e, "the busy timeout")) << e.what();
  EXPECT_GE(waited.count(), (busyTimeout - milliseconds(10)).count());
  EXPECT_LT(waited.count(), (busyTimeout + kSlack).count());
  std::printf(
      "[ deadline ] no deadline, busy timeout 1000 ms: failed after "
      "%lld ms\n",
      static_cast<long long>(waited.count()));
}

TEST_F(SqliteDeadlineTest, ALaterDeadlineDoesNotLengthenTheBusyTimeout) {
  const milliseconds busyTimeout(400);
  auto store = openStore(path_, busyTimeout);
  auto holder = holdWriteLock(std::chrono::seconds(30));

  const auto started = steady_clock::now();
  const DLMException e = errorOf([&] {
    const DeadlineScope scope(deadlineAfter(std::chrono::seconds(30)));
    acquire(*store, pathKey(kScope, "x"));
  });
  const milliseconds waited = since(started);
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(contains(e, "the busy timeout")) << e.what();
  EXPECT_LT(waited.count(), (busyTimeout + kSlack).count());
}

TEST_F(SqliteDeadlineTest, ADeadlineAlreadyPassedFailsAtOnceOnABusyFile) {
  auto store = openStore(path_, std::chrono::seconds(5));
  auto holder = holdWriteLock(std::chrono::seconds(30));

  const auto started = steady_clock::now();
  const DLMException e = errorOf([&] {
    const DeadlineScope scope(deadlineAfter(milliseconds(0)));
    acquire(*store, pathKey(kScope, "x"));
  });
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_LT(since(started).count(), (milliseconds(100) + kSlack).count());
}

TEST_F(SqliteDeadlineTest, EveryWritingCallIsBounded) {
  auto store = openStore(path_, std::chrono::seconds(5));
  const StoreKey key = pathKey(kScope, "held");
  std::string token;
  ASSERT_TRUE(acquire(*store, key, std::chrono::seconds(30), &token).acquired);
  auto holder = holdWriteLock(std::chrono::seconds(30));

  const std::vector<std::pair<std::string, std::function<void()>>> calls{
      {"tryAcquire", [&] { acquire(*store, pathKey(kScope, "x")); }},
      {"release",
       [&] { store->release(key, token, dlm::LockMode::EXCLUSIVE); }},
      {"extend",
       [&] {
         store->extend(key.key, token, std::chrono::seconds(30),
                       dlm::LockMode::EXCLUSIVE);
       }},
      {"forceRelease", [&] { store->forceRelease(key.key); }},
      {"registerWait",
       [&] {
         store->registerWait(WaitRequest{key, "owner-2", milliseconds(1000)});
       }},
      {"unregisterWait", [&] { store->unregisterWait(key.key, "owner-2"); }},
  };
  for (const auto& [name, call] : calls) {
    const auto started = steady_clock::now();
    const DLMException e = errorOf([&] {
      const DeadlineScope scope(deadlineAfter(milliseconds(200)));
      call();
    });
    const milliseconds waited = since(started);
    EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED)
        << name << ": " << e.what();
    EXPECT_TRUE(e.transient()) << name;
    EXPECT_LT(waited.count(), (milliseconds(200) + kSlack).count()) << name;
  }
  // Reads are not blocked by a writer in WAL mode, deadline or not.
  EXPECT_TRUE(store->describe(key.key)->held);
}

// Thread A of a store sits in a long busy wait, holding the store's only
// connection; thread B's call waits for that connection only until B's own
// deadline.
TEST_F(SqliteDeadlineTest, AThreadWaitingForTheStoresConnectionIsBounded) {
  auto store = openStore(path_, std::chrono::seconds(3));
  auto holder = holdWriteLock(std::chrono::seconds(30));

  std::atomic<bool> aStarted{false};
  auto a = std::async(std::launch::async, [&] {
    aStarted = true;
    return errorOf([&] { acquire(*store, pathKey(kScope, "a")); }).code();
  });
  while (!aStarted) std::this_thread::yield();
  // A is inside its busy wait (which lasts 3 s) well before this ends.
  std::this_thread::sleep_for(milliseconds(200));

  const auto started = steady_clock::now();
  const DLMException e = errorOf([&] {
    const DeadlineScope scope(deadlineAfter(milliseconds(300)));
    acquire(*store, pathKey(kScope, "b"));
  });
  const milliseconds waited = since(started);
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(e.transient());
  // It waited for the connection, not for the file: A still had it.
  EXPECT_TRUE(contains(e, "the store's connection")) << e.what();
  EXPECT_TRUE(contains(e, "acquiring")) << e.what();
  EXPECT_GE(waited.count(), milliseconds(290).count());
  EXPECT_LT(waited.count(), (milliseconds(300) + kSlack).count());
  std::printf(
      "[ deadline ] second thread, 300 ms deadline, first thread in "
      "a 3000 ms busy wait: failed after %lld ms\n",
      static_cast<long long>(waited.count()));
  EXPECT_EQ(a.get(), ErrorCode::RETRIES_EXHAUSTED);
}

// Without deadlines, B's wait for the connection and its own busy wait
// together stay within one busy timeout from B's start.
TEST_F(SqliteDeadlineTest,
       WithoutADeadlineASecondThreadWaitsAtMostTheBusyTimeout) {
  const milliseconds busyTimeout(1000);
  auto store = openStore(path_, busyTimeout);
  auto holder = holdWriteLock(std::chrono::seconds(30));

  std::atomic<bool> aStarted{false};
  auto a = std::async(std::launch::async, [&] {
    aStarted = true;
    return errorOf([&] { acquire(*store, pathKey(kScope, "a")); }).code();
  });
  while (!aStarted) std::this_thread::yield();
  std::this_thread::sleep_for(milliseconds(200));

  const auto started = steady_clock::now();
  const DLMException e =
      errorOf([&] { acquire(*store, pathKey(kScope, "b")); });
  const milliseconds waited = since(started);
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_LT(waited.count(), (busyTimeout + kSlack).count());
  EXPECT_EQ(a.get(), ErrorCode::RETRIES_EXHAUSTED);
}

// close() refuses new calls at once, even while another thread holds the
// connection in a busy wait; it then waits for that thread only.
TEST_F(SqliteDeadlineTest, CallsAfterCloseAreRefusedWithoutWaiting) {
  auto store = openStore(path_, std::chrono::seconds(1));
  auto holder = holdWriteLock(std::chrono::seconds(30));
  auto a = std::async(std::launch::async, [&] {
    return errorOf([&] { acquire(*store, pathKey(kScope, "a")); }).code();
  });
  std::this_thread::sleep_for(milliseconds(200));
  auto closing = std::async(std::launch::async, [&] { store->close(); });
  // now() checks only the closed flag: once it refuses, close() has begun
  // (and is waiting for A).
  const auto closeStarted = steady_clock::now();
  while (since(closeStarted) < milliseconds(2000)) {
    try {
      store->now();
    } catch (const DLMException&) {
      break;
    }
    std::this_thread::yield();
  }

  const auto started = steady_clock::now();
  const DLMException e =
      errorOf([&] { acquire(*store, pathKey(kScope, "b")); });
  EXPECT_EQ(e.code(), ErrorCode::INTERNAL_ERROR) << e.what();
  EXPECT_TRUE(contains(e, "store closed")) << e.what();
  // Far less than the ~750 ms A still waits, with room for scheduling.
  EXPECT_LT(since(started).count(), milliseconds(300).count());
  EXPECT_EQ(a.get(), ErrorCode::RETRIES_EXHAUSTED);
  closing.get();
}

}  // namespace
}  // namespace dlm::sqlite_test
