// Transactional release (commitLock on the application's own connection)
// and the in-process delivery of releases between store objects on one file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"

namespace dlm::sqlite_test {
namespace {

using test::codeOf;
using test::errorOf;

const std::string kScope = "DC#farm#client#";

// Records every key it hears.
class RecordingListener : public ReleaseListener {
 public:
  void released(std::string_view key) override {
    std::lock_guard<std::mutex> guard(mutex_);
    keys_.emplace_back(key);
  }
  void missedReleases() override {
    std::lock_guard<std::mutex> guard(mutex_);
    ++missed_;
  }
  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> guard(mutex_);
    return keys_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> keys_;
  int missed_ = 0;
};

// An application transaction of another kind of store.
class OtherTransaction : public AppTransaction {};

class SqliteReleaseWithinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = openStore(path_);
    // The application's own table in the same file.
    app_.exec("CREATE TABLE app_work (id TEXT PRIMARY KEY)");
  }

  // Acquires key_ through store_; the token goes to token_.
  void hold() {
    ASSERT_TRUE(
        acquire(*store_, key_, std::chrono::seconds(30), &token_).acquired);
  }

  bool held() { return store_->describe(key_.key)->held; }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  std::unique_ptr<SqliteStore> store_;
  RawDb app_{path_};
  const StoreKey key_ = pathKey(kScope, "jobs.import");
  std::string token_;
};

TEST_F(SqliteReleaseWithinTest, TheApplicationsCommitFreesTheLock) {
  hold();
  RecordingListener listener;
  auto other = openStore(path_);
  ASSERT_TRUE(other->subscribeReleases(&listener));

  app_.exec("BEGIN IMMEDIATE; INSERT INTO app_work VALUES ('w1')");
  SqliteTransaction tx(app_.handle());
  store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  // Not visible to anyone before the application commits.
  EXPECT_TRUE(other->describe(key_.key)->held);
  app_.exec("COMMIT");

  EXPECT_FALSE(other->describe(key_.key)->held);
  EXPECT_EQ(app_.scalar("SELECT count(*) FROM app_work"), "1");
  // Announced in-process (before the commit; waiters then poll the row).
  EXPECT_EQ(listener.keys(), std::vector<std::string>{key_.key});
  // Someone else can take it now.
  EXPECT_TRUE(
      acquire(*other, key_, std::chrono::seconds(30), nullptr, "owner-2")
          .acquired);
  other->unsubscribeReleases(&listener);
}

TEST_F(SqliteReleaseWithinTest, TheApplicationsRollbackKeepsTheLockHeld) {
  hold();
  app_.exec("BEGIN IMMEDIATE; INSERT INTO app_work VALUES ('w1')");
  SqliteTransaction tx(app_.handle());
  store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  app_.exec("ROLLBACK");

  EXPECT_TRUE(held());
  EXPECT_EQ(app_.scalar("SELECT count(*) FROM app_work"), "0");
  // rollbackLock's release in the library's own transaction still works.
  EXPECT_TRUE(store_->release(key_, token_, dlm::LockMode::EXCLUSIVE));
  EXPECT_FALSE(held());
}

TEST_F(SqliteReleaseWithinTest,
       ATakeoverIsLockNotHeldAndTheApplicationCannotCommit) {
  hold();
  // The lease ran out and another acquisition took the row.
  RawDb(path_).exec("UPDATE dlm_locks SET expires_at_ms = 1");
  auto other = openStore(path_);
  std::string otherToken;
  ASSERT_TRUE(
      acquire(*other, key_, std::chrono::seconds(30), &otherToken, "owner-2")
          .acquired);

  app_.exec("BEGIN IMMEDIATE; INSERT INTO app_work VALUES ('unprotected')");
  SqliteTransaction tx(app_.handle());
  const DLMException e = errorOf(
      [&] { store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE); });
  EXPECT_EQ(e.code(), ErrorCode::LOCK_NOT_HELD);
  EXPECT_NE(std::string(e.what()).find(key_.key), std::string::npos)
      << e.what();

  EXPECT_THROW(app_.exec("COMMIT"), std::runtime_error);
  // The work done without the lock is not in the file; the new holder keeps
  // the lock.
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM app_work"), "0");
  const auto row = other->describe(key_.key);
  EXPECT_TRUE(row->held);
  EXPECT_EQ(row->owner, "owner-2");
}

// guardWithin in a deferred transaction that has only read: a takeover can
// commit after the guard (nothing holds the write lock yet), but then the
// application's first write fails, as its snapshot predates the takeover.
TEST_F(SqliteReleaseWithinTest,
       ATakeoverAfterAGuardInADeferredTransactionFailsItsFirstWrite) {
  hold();
  app_.exec("BEGIN");
  SqliteTransaction tx(app_.handle());
  store_->guardWithin(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  // The lease runs out and another acquisition takes the row.
  RawDb(path_).exec("UPDATE dlm_locks SET expires_at_ms = 1");
  auto other = openStore(path_);
  ASSERT_TRUE(
      acquire(*other, key_, std::chrono::seconds(30), nullptr, "owner-2")
          .acquired);
  EXPECT_THROW(app_.exec("INSERT INTO app_work VALUES ('unprotected')"),
               std::runtime_error);
  app_.exec("ROLLBACK");
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM app_work"), "0");
}

// Under BEGIN IMMEDIATE the guarded transaction holds the write lock: the
// takeover cannot commit before it ends, and the guard writes nothing.
TEST_F(SqliteReleaseWithinTest, AGuardUnderBeginImmediateHoldsOffATakeover) {
  hold();
  app_.exec("BEGIN IMMEDIATE");
  SqliteTransaction tx(app_.handle());
  store_->guardWithin(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  EXPECT_EQ(sqlite3_total_changes(app_.handle()), 0) << "the guard only reads";
  SqliteStoreOptions options;
  options.path = path_;
  options.busyTimeout = std::chrono::milliseconds(100);
  SqliteStore rival(options);
  rival.initialize(false);
  EXPECT_EQ(codeOf([&] { rival.forceRelease(key_.key); }),
            ErrorCode::RETRIES_EXHAUSTED);
  app_.exec("INSERT INTO app_work VALUES ('protected'); COMMIT");
  EXPECT_TRUE(held());
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM app_work"), "1");
}

TEST_F(SqliteReleaseWithinTest, AForceReleasedLockIsLockNotHeldToo) {
  hold();
  ASSERT_TRUE(store_->forceRelease(key_.key));
  app_.exec("BEGIN IMMEDIATE; INSERT INTO app_work VALUES ('w1')");
  SqliteTransaction tx(app_.handle());
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::LOCK_NOT_HELD);
  EXPECT_THROW(app_.exec("COMMIT"), std::runtime_error);
}

TEST_F(SqliteReleaseWithinTest, AnAdapterOfAnotherStoreIsInvalidArgument) {
  hold();
  OtherTransaction tx;
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  SqliteTransaction null(nullptr);
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(null, key_, token_, dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(held());
}

TEST_F(SqliteReleaseWithinTest,
       AConnectionWithoutATransactionIsInvalidArgument) {
  hold();
  SqliteTransaction tx(app_.handle());  // autocommit: no BEGIN
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(held());
}

TEST_F(SqliteReleaseWithinTest, AConnectionToAnotherFileIsInvalidArgument) {
  hold();
  RawDb elsewhere(dir_.file("other.sqlite"));
  // Even one with the dlm tables: the release must land in the store's file.
  { openStore(dir_.file("other.sqlite")); }
  elsewhere.exec("BEGIN IMMEDIATE");
  SqliteTransaction tx(elsewhere.handle());
  const DLMException e = errorOf(
      [&] { store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(e.what()).find("other.sqlite"), std::string::npos)
      << e.what();
  elsewhere.exec("ROLLBACK");
  EXPECT_TRUE(held());

  RawDb memory(":memory:");
  memory.exec("BEGIN");
  SqliteTransaction inMemory(memory.handle());
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(inMemory, key_, token_,
                                 dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_TRUE(held());
}

TEST_F(SqliteReleaseWithinTest, TheSameFileSpelledAnotherWayIsAccepted) {
  hold();
  const std::string link = dir_.file("link.sqlite");
  std::filesystem::create_symlink(path_, link);
  RawDb viaLink(link);
  viaLink.exec("BEGIN IMMEDIATE");
  SqliteTransaction tx(viaLink.handle());
  store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  viaLink.exec("COMMIT");
  EXPECT_FALSE(held());
}

TEST_F(SqliteReleaseWithinTest, AClosedStoreRefusesIt) {
  hold();
  store_->close();
  app_.exec("BEGIN IMMEDIATE");
  SqliteTransaction tx(app_.handle());
  EXPECT_EQ(codeOf([&] {
              store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
            }),
            ErrorCode::INTERNAL_ERROR);
  app_.exec("ROLLBACK");
}

// Another thread of the same store waits (inside its BEGIN IMMEDIATE, with
// the store's connection) for the application's write lock; commitLock
// must not wait for that thread, or both would wait out the busy timeout.
TEST_F(SqliteReleaseWithinTest, DoesNotWaitForAStoreCallBlockedByTheApp) {
  hold();
  app_.exec("BEGIN IMMEDIATE; INSERT INTO app_work VALUES ('w1')");
  std::promise<AcquireResult> waiter;
  auto result = waiter.get_future();
  std::thread t([&] {
    try {
      waiter.set_value(
          acquire(*store_, key_, std::chrono::seconds(30), nullptr, "owner-2"));
    } catch (...) {
      waiter.set_exception(std::current_exception());
    }
  });
  // Give the thread time to reach its busy wait (the test passes either
  // way when it has not; it then just does not exercise the case).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SqliteTransaction tx(app_.handle());
  store_->commitLock(tx, key_, token_, dlm::LockMode::EXCLUSIVE);
  app_.exec("COMMIT");
  t.join();
  // The waiting attempt ran after the commit and took the freed lock
  // (instead of failing with RETRIES_EXHAUSTED).
  EXPECT_TRUE(result.get().acquired);
}

// --- Release delivery between store objects ----------------------------------

class SqliteReleaseBusTest : public ::testing::Test {
 protected:
  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
};

TEST_F(SqliteReleaseBusTest, AReleaseReachesListenersOfEveryStoreOnTheFile) {
  auto a = openStore(path_);
  auto b = openStore(path_);
  auto elsewhere = openStore(dir_.file("other.sqlite"));
  RecordingListener onB, onElsewhere;
  ASSERT_TRUE(b->subscribeReleases(&onB));
  ASSERT_TRUE(elsewhere->subscribeReleases(&onElsewhere));

  const StoreKey key = pathKey(kScope, "order-1");
  std::string token;
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(onB.keys(), std::vector<std::string>{key.key});
  EXPECT_TRUE(onElsewhere.keys().empty());

  // A release that frees nothing announces nothing.
  EXPECT_TRUE(a->release(
      key, token,
      dlm::LockMode::EXCLUSIVE));  // already freed by this token: true
  EXPECT_EQ(onB.keys().size(), 1U);

  // forceRelease announces too.
  const StoreKey other = pathKey(kScope, "order-2");
  ASSERT_TRUE(acquire(*a, other).acquired);
  ASSERT_TRUE(a->forceRelease(other.key));
  EXPECT_EQ(onB.keys(), (std::vector<std::string>{key.key, other.key}));

  b->unsubscribeReleases(&onB);
  elsewhere->unsubscribeReleases(&onElsewhere);
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(onB.keys().size(), 2U);  // nothing after unsubscribe
}

TEST_F(SqliteReleaseBusTest, AStoreOnTheFileByAnotherPathHearsItsReleases) {
  auto a = openStore(path_);
  // The same file as "<dir>/./locks.sqlite".
  auto b = openStore(
      (std::filesystem::path(path_).parent_path() / "." / "locks.sqlite")
          .string());
  RecordingListener listener;
  ASSERT_TRUE(b->subscribeReleases(&listener));
  const StoreKey key = pathKey(kScope, "x");
  std::string token;
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(listener.keys(), std::vector<std::string>{key.key});
  b->unsubscribeReleases(&listener);
}

TEST_F(SqliteReleaseBusTest, InMemoryStoresOnlyHearThemselves) {
  SqliteStore one(SqliteStoreOptions{":memory:"});
  SqliteStore two(SqliteStoreOptions{":memory:"});
  one.initialize(true);
  two.initialize(true);
  RecordingListener onOne;
  ASSERT_TRUE(one.subscribeReleases(&onOne));
  const StoreKey key = pathKey(kScope, "x");
  std::string token;
  ASSERT_TRUE(acquire(two, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(two.release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_TRUE(onOne.keys().empty());
  ASSERT_TRUE(acquire(one, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(one.release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(onOne.keys(), std::vector<std::string>{key.key});
  one.unsubscribeReleases(&onOne);
}

TEST_F(SqliteReleaseBusTest, ADestroyedStoreDropsItsListeners) {
  auto a = openStore(path_);
  RecordingListener listener;
  {
    auto b = openStore(path_);
    ASSERT_TRUE(b->subscribeReleases(&listener));
  }  // destroyed without unsubscribing
  const StoreKey key = pathKey(kScope, "x");
  std::string token;
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);
  ASSERT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_TRUE(listener.keys().empty());
}

// A listener that blocks inside released() until told to return.
class BlockingListener : public ReleaseListener {
 public:
  void released(std::string_view) override {
    std::unique_lock<std::mutex> lock(mutex_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return mayReturn_; });
    returned_ = true;
  }
  void missedReleases() override {}

  void waitUntilEntered() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void letReturn() {
    std::lock_guard<std::mutex> guard(mutex_);
    mayReturn_ = true;
    changed_.notify_all();
  }
  bool returned() {
    std::lock_guard<std::mutex> guard(mutex_);
    return returned_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool mayReturn_ = false;
  bool returned_ = false;
};

TEST_F(SqliteReleaseBusTest, UnsubscribeWaitsForADeliveryInProgress) {
  auto a = openStore(path_);
  auto b = openStore(path_);
  BlockingListener listener;
  ASSERT_TRUE(b->subscribeReleases(&listener));
  const StoreKey key = pathKey(kScope, "x");
  std::string token;
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);

  std::thread releaser(
      [&] { a->release(key, token, dlm::LockMode::EXCLUSIVE); });
  listener.waitUntilEntered();
  std::atomic<bool> callbackDoneWhenUnsubscribed{false};
  std::thread unsubscriber([&] {
    b->unsubscribeReleases(&listener);
    callbackDoneWhenUnsubscribed = listener.returned();
  });
  // The releasing store's connection is free meanwhile: its other calls
  // are not held up by a slow listener.
  EXPECT_FALSE(a->describe(key.key)->held);
  listener.letReturn();
  unsubscriber.join();
  releaser.join();
  EXPECT_TRUE(callbackDoneWhenUnsubscribed.load());
}

}  // namespace
}  // namespace dlm::sqlite_test
