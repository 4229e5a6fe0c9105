// The SQLite store where it differs from PostgreSQL: several store objects
// (as several processes would) on one file, WAL, the busy handler, error
// translation, closing.
#include "dlm/sqlite_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/error.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using test::errorOf;

const std::string kScope = "DC#farm#client#";

class SqliteStoreTest : public ::testing::Test {
 protected:
  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
};

TEST_F(SqliteStoreTest, TwoStoreObjectsOnOneFileSeeEachOthersLocks) {
  auto a = openStore(path_);
  auto b = openStore(path_);
  const StoreKey key = pathKey(kScope, "order-1");
  std::string token;
  const AcquireResult got = acquire(*a, key, std::chrono::seconds(30), &token);
  ASSERT_TRUE(got.acquired);

  const auto row = b->describe(key.key);
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->held);
  EXPECT_EQ(row->owner, "owner-1");
  EXPECT_EQ(row->fencingToken, got.fencingToken);
  const auto held = b->listHeld(kScope);
  ASSERT_EQ(held.size(), 1U);
  EXPECT_EQ(held[0].key, key.key);

  EXPECT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  EXPECT_FALSE(b->describe(key.key)->held);
  EXPECT_TRUE(b->listHeld(kScope).empty());
}

TEST_F(SqliteStoreTest, ALockHeldThroughOneStoreObjectBlocksAnother) {
  auto a = openStore(path_);
  auto b = openStore(path_);
  const StoreKey key = pathKey(kScope, "jobs.nightly");
  std::string token;
  ASSERT_TRUE(acquire(*a, key, std::chrono::seconds(30), &token).acquired);

  const AcquireResult same = acquire(*b, key);
  EXPECT_FALSE(same.acquired);
  EXPECT_EQ(same.blockedBy, key.key);
  // The hierarchy works across connections too: the parent and a child are
  // blocked, a sibling is not.
  const AcquireResult parent = acquire(*b, pathKey(kScope, "jobs"));
  EXPECT_FALSE(parent.acquired);
  EXPECT_EQ(parent.blockedBy, key.key);
  const AcquireResult child =
      acquire(*b, pathKey(kScope, "jobs.nightly.step1"));
  EXPECT_FALSE(child.acquired);
  EXPECT_EQ(child.blockedBy, key.key);
  EXPECT_TRUE(acquire(*b, pathKey(kScope, "jobs.hourly")).acquired);

  ASSERT_TRUE(a->release(key, token, dlm::LockMode::EXCLUSIVE));
  const AcquireResult after = acquire(*b, key);
  EXPECT_TRUE(after.acquired);
  EXPECT_EQ(after.fencingToken, 2);
}

TEST_F(SqliteStoreTest, TheFileIsInWalMode) {
  auto store = openStore(path_);
  RawDb raw(path_);
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
}

TEST_F(SqliteStoreTest, AcquiringAgainWithTheHoldingTokenChangesNothing) {
  auto store = openStore(path_);
  const StoreKey key = pathKey(kScope, "x");
  const Holder holder{"h", 1};
  const AcquireRequest request{key, "owner", "token-1", milliseconds(30000),
                               holder};
  const AcquireResult first = store->tryAcquire(request);
  const AcquireResult retried = store->tryAcquire(request);
  ASSERT_TRUE(first.acquired);
  ASSERT_TRUE(retried.acquired);
  EXPECT_EQ(retried.fencingToken, first.fencingToken);
  EXPECT_EQ(retried.acquiredAt, first.acquiredAt);
  EXPECT_EQ(retried.expiresAt, first.expiresAt);
}

TEST_F(SqliteStoreTest, RowsCreatedOnlyAsAncestorsAreNotDescribedAsLocked) {
  auto store = openStore(path_);
  ASSERT_TRUE(acquire(*store, pathKey(kScope, "a.b.c")).acquired);
  RawDb raw(path_);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM dlm_locks"), "3");
  EXPECT_FALSE(store->describe(kScope + "a").has_value());
  EXPECT_FALSE(store->describe(kScope + "a.b").has_value());
  EXPECT_TRUE(store->describe(kScope + "a.b.c").has_value());
}

TEST_F(SqliteStoreTest, RowsStoreTheCrc32OfTheKey) {
  auto store = openStore(path_);
  ASSERT_TRUE(acquire(*store, pathKey("", "123456789")).acquired);
  RawDb raw(path_);
  // The standard CRC-32 check value of "123456789".
  EXPECT_EQ(raw.scalar("SELECT resource_crc FROM dlm_locks "
                       "WHERE resource = '123456789'"),
            std::to_string(0xCBF43926U));
}

TEST_F(SqliteStoreTest, ListHeldIsInKeyOrderAndIncludesExpiredRows) {
  auto store = openStore(path_);
  ASSERT_TRUE(acquire(*store, pathKey(kScope, "b")).acquired);
  ASSERT_TRUE(acquire(*store, pathKey(kScope, "a"), milliseconds(1)).acquired);
  ASSERT_TRUE(acquire(*store, pathKey("DC#farm#other#", "a")).acquired);
  std::this_thread::sleep_for(milliseconds(5));
  const auto held = store->listHeld(kScope);
  ASSERT_EQ(held.size(), 2U);
  EXPECT_EQ(held[0].key, kScope + "a");
  EXPECT_FALSE(held[0].held);  // expired, not yet taken
  EXPECT_TRUE(held[0].statusHeld);
  EXPECT_EQ(held[1].key, kScope + "b");
  EXPECT_TRUE(held[1].held);
  EXPECT_EQ(store->listHeld("").size(), 3U);
}

TEST_F(SqliteStoreTest, AHugeTtlSaturatesInsteadOfOverflowing) {
  auto store = openStore(path_);
  // Over the default cap (365 days, dlm_limits): a DBA lifts it all the way.
  RawDb(path_).exec("UPDATE dlm_limits SET max_ttl_ms = 9223372036854775807");
  const StoreKey key = pathKey(kScope, "forever-ish");
  const AcquireResult got = acquire(*store, key, milliseconds::max());
  ASSERT_TRUE(got.acquired);
  EXPECT_GT(got.expiresAt, got.acquiredAt);
  EXPECT_TRUE(store->describe(key.key)->held);
}

TEST_F(SqliteStoreTest, BusyTimeoutFailsAsRetriesExhaustedTransient) {
  const milliseconds busyTimeout(200);
  auto store = openStore(path_, busyTimeout);
  RawDb blocker(path_);
  blocker.exec("BEGIN IMMEDIATE");  // holds the file's write lock

  const auto started = std::chrono::steady_clock::now();
  const DLMException e =
      errorOf([&] { acquire(*store, pathKey(kScope, "x")); });
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_NE(std::string(e.what()).find("SQLite code 5"), std::string::npos)
      << e.what();
  // It gave up only after the timeout (a lower bound, not a speed claim).
  EXPECT_GE(waited, busyTimeout);

  // Once the other writer is done the same store works again.
  blocker.exec("ROLLBACK");
  EXPECT_TRUE(acquire(*store, pathKey(kScope, "x")).acquired);
}

TEST_F(SqliteStoreTest, ReadsAreNotBlockedByAWriter) {
  auto store = openStore(path_, milliseconds(100));
  ASSERT_TRUE(acquire(*store, pathKey(kScope, "x")).acquired);
  RawDb blocker(path_);
  blocker.exec("BEGIN IMMEDIATE");
  // WAL: readers see the last committed state while a writer is active.
  EXPECT_TRUE(store->describe(kScope + "x")->held);
  EXPECT_EQ(store->listHeld(kScope).size(), 1U);
  blocker.exec("ROLLBACK");
}

TEST_F(SqliteStoreTest, AnUnopenablePathIsAConnectionError) {
  SqliteStoreOptions options;
  options.path = dir_.file("missing-dir/locks.sqlite");
  SqliteStore store(options);
  const DLMException e = errorOf([&] { store.initialize(true); });
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_NE(std::string(e.what()).find(options.path), std::string::npos)
      << e.what();
  // Opening is retried on the next call, not remembered as failed.
  std::filesystem::create_directory(dir_.file("missing-dir"));
  EXPECT_NO_THROW(store.initialize(true));
}

TEST_F(SqliteStoreTest, AFileThatIsNotADatabaseIsAnInternalErrorWithTheCode) {
  std::ofstream(path_) << std::string(8192, 'x');
  SqliteStore store(SqliteStoreOptions{path_});
  const DLMException e = errorOf([&] { store.initialize(true); });
  EXPECT_EQ(e.code(), ErrorCode::INTERNAL_ERROR) << e.what();
  EXPECT_NE(std::string(e.what()).find("SQLite code 26"), std::string::npos)
      << e.what();  // SQLITE_NOTADB
}

TEST_F(SqliteStoreTest, OperationsOnAFileWithoutTheSchemaAreSchemaMismatch) {
  SqliteStore store(SqliteStoreOptions{path_});
  const DLMException e = errorOf([&] { acquire(store, pathKey(kScope, "x")); });
  EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
  EXPECT_NE(std::string(e.what()).find("dlmctl migrate"), std::string::npos)
      << e.what();
}

// The file deleted under a holder (and made again, as `dlmctl migrate` or
// applyMigrations(true) would): the holder's renewals fail at once instead
// of going on in the unlinked file, so its guard reports the loss, and the
// new file's holder is the only one.
TEST_F(SqliteStoreTest, AFileDeletedWhileInUseEndsTheHoldsMadeThroughIt) {
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path_});
  store->initialize(true);
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(store)
               .build();
  m->initialize();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, std::chrono::seconds(3));
  const std::string key = lock.storeKey();
  std::atomic<bool> lost{false};
  std::mutex whyMutex;
  std::string why;
  ErrorCode whyCode = ErrorCode::INTERNAL_ERROR;
  KeepAliveOptions keepAlive;
  keepAlive.onLost = [&](const DLMException& e) {
    {
      std::lock_guard<std::mutex> l(whyMutex);
      why = e.what();
      whyCode = e.code();
    }
    lost = true;
  };
  LockGuard guard(*m, std::move(lock), keepAlive);

  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path_ + suffix);
  }
  // Another process makes the file again and takes the key: token 1.
  auto fresh = openStore(path_);
  std::string token;
  const AcquireResult taken = acquire(*fresh, StoreKey{key, {}, "", ""},
                                      std::chrono::seconds(30), &token);
  ASSERT_TRUE(taken.acquired);
  EXPECT_EQ(taken.fencingToken, 1);

  // The old store's next call (the guard's renewal, at once or at the
  // latest within its 1 s turn of the 3 s TTL) fails, and the guard reports
  // the loss before its lease would have ended.
  const auto start = std::chrono::steady_clock::now();
  while (!lost &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(lost.load());
  EXPECT_TRUE(guard.lost());
  {
    // The file gone (a renewal before the new file was made, or the first
    // call after it), or, after a transient failure, the new file's answer.
    std::lock_guard<std::mutex> l(whyMutex);
    EXPECT_TRUE(whyCode == ErrorCode::CONNECTION_ERROR ||
                whyCode == ErrorCode::LOCK_NOT_HELD)
        << why;
  }
  // After that the store works on the file that is there now.
  EXPECT_FALSE(acquire(*store, StoreKey{key, {}, "", ""}).acquired);
}

// The same, noticed at once: the store watches its file, and the keep-alive
// renews as soon as it vanishes, not at its turn (a third of the TTL).
TEST_F(SqliteStoreTest, AGuardLearnsOfItsDeletedFileAtOnceNotAtItsNextTurn) {
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path_});
  store->initialize(true);
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(store)
               .build();
  m->initialize();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, std::chrono::seconds(60));  // renewed every 20 s
  std::atomic<bool> lost{false};
  KeepAliveOptions keepAlive;
  keepAlive.onLost = [&](const DLMException&) { lost = true; };
  LockGuard guard(*m, std::move(lock), keepAlive);

  std::filesystem::remove(path_);
  const auto start = std::chrono::steady_clock::now();
  while (!lost &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(lost.load()) << "not reported within 5 s of the 20 s turn";
  EXPECT_TRUE(guard.lost());
}

// A store whose file disappeared never makes a new one in its place, not
// even initialize(true) (a new file's tokens start at 1 again); once
// someone makes the file (dlmctl migrate), the store uses it.
TEST_F(SqliteStoreTest, AStoreNeverRecreatesAFileThatDisappearedUnderIt) {
  SqliteStore store(SqliteStoreOptions{path_});
  store.initialize(true);
  const StoreKey key{kScope + "k", {}, "", ""};
  ASSERT_TRUE(acquire(store, key).acquired);
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path_ + suffix);
  }
  EXPECT_EQ(errorOf([&] { acquire(store, key); }).code(),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_EQ(errorOf([&] { store.initialize(true); }).code(),
            ErrorCode::CONNECTION_ERROR);
  EXPECT_FALSE(std::filesystem::exists(path_));
  openStore(path_);  // made again, on purpose
  EXPECT_NO_THROW(store.initialize(false));
  EXPECT_TRUE(acquire(store, key).acquired);
}

TEST_F(SqliteStoreTest, AClosedStoreRefusesEveryCall) {
  auto store = openStore(path_);
  store->close();
  store->close();  // idempotent
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { store->initialize(false); },
           [&] { acquire(*store, pathKey(kScope, "x")); },
           [&] {
             store->release(StoreKey{kScope + "x", {}, {}, {}}, "t",
                            dlm::LockMode::EXCLUSIVE);
           },
           [&] {
             store->extend(kScope + "x", "t", milliseconds(10),
                           dlm::LockMode::EXCLUSIVE);
           },
           [&] { store->describe(kScope + "x"); }, [&] { store->listHeld(""); },
           [&] { store->forceRelease(kScope + "x"); }, [&] { store->now(); }}) {
    const DLMException e = errorOf(call);
    EXPECT_EQ(e.code(), ErrorCode::INTERNAL_ERROR);
    EXPECT_NE(std::string(e.what()).find("store closed"), std::string::npos)
        << e.what();
  }
}

TEST_F(SqliteStoreTest, ThreadsSharingOneStoreNeverShareALock) {
  auto store = openStore(path_);
  const StoreKey key = pathKey(kScope, "shared");
  std::atomic<int> holders{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> acquisitions{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::string token;
        if (!acquire(*store, key, std::chrono::seconds(30), &token).acquired) {
          continue;
        }
        if (holders.fetch_add(1) != 0) ++overlaps;
        ++acquisitions;
        holders.fetch_sub(1);
        EXPECT_TRUE(store->release(key, token, dlm::LockMode::EXCLUSIVE));
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(store->describe(key.key)->fencingToken, acquisitions.load());
}

// Several processes, each with its own store object on the file: every
// acquisition gets its own fencing token (no lost update between processes).
TEST_F(SqliteStoreTest, ProcessesSharingTheFileGetDistinctFencingTokens) {
  openStore(path_);  // schema applied before the children start
  const StoreKey key = pathKey(kScope, "contended");
  constexpr int kProcesses = 4;
  constexpr int kCycles = 100;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: no gtest assertions; report through a file and the exit code.
      int status = 0;
      try {
        // Four processes cycling on one key: on a busy machine one may wait
        // seconds for the write lock. Distinct tokens are the point here.
        auto store = openStore(path_, std::chrono::seconds(30));
        std::ofstream out(dir_.file("tokens-" + std::to_string(p)));
        for (int i = 0; i < kCycles; ++i) {
          std::string token;
          const AcquireResult r =
              acquire(*store, key, std::chrono::seconds(30), &token);
          if (!r.acquired) continue;
          out << r.fencingToken << "\n";
          if (!store->release(key, token, dlm::LockMode::EXCLUSIVE)) status = 2;
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        status = 1;
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  std::vector<std::int64_t> tokens;
  for (int p = 0; p < kProcesses; ++p) {
    std::ifstream in(dir_.file("tokens-" + std::to_string(p)));
    for (std::int64_t t; in >> t;) tokens.push_back(t);
  }
  ASSERT_FALSE(tokens.empty());
  const std::set<std::int64_t> distinct(tokens.begin(), tokens.end());
  EXPECT_EQ(distinct.size(), tokens.size());
  EXPECT_EQ(*distinct.begin(), 1);
  EXPECT_EQ(*distinct.rbegin(), static_cast<std::int64_t>(tokens.size()));
}

}  // namespace
}  // namespace dlm::sqlite_test
