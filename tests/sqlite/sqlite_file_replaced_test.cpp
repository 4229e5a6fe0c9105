// A database file rewritten in place (same inode) under a store that has it
// open: truncated (`: > file`), or another file's bytes copied over it. The
// store must notice before its next write, tell the holders through it that
// their locks are lost, and never hand a key's fencing token out again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

#include "dlm/dlm.h"
#include "dlm/error.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test::errorOf;

const std::string kReplacedScope = "DC#farm#client#";

ino_t inodeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

// Writes `bytes` over the file through another descriptor: O_TRUNC, same
// inode, as `: > file` (empty bytes) or `cat other > file` do.
void rewriteInPlace(const std::string& path, const std::string& bytes) {
  const ino_t before = inodeOf(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  ASSERT_EQ(inodeOf(path), before);
}

std::string contentsOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Moves everything in the WAL into the file and empties the WAL, as the
// automatic checkpoint or the last connection's close does: what the file
// alone then holds is all there is.
void checkpoint(const std::string& path) {
  RawDb(path).exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

class SqliteFileReplacedTest : public ::testing::Test {
 protected:
  // `store` holds `key_` with fencing token 4 (three acquisitions before).
  void holdWithTokenFour(SqliteStore& store) {
    std::string token;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(acquire(store, key_, seconds(30), &token).acquired);
      ASSERT_TRUE(store.release(key_, token, LockMode::EXCLUSIVE));
    }
    const AcquireResult held = acquire(store, key_, seconds(30), &token_);
    ASSERT_TRUE(held.acquired);
    ASSERT_EQ(held.fencingToken, 4);
  }

  // The holder's next call fails as for a deleted file.
  void expectExtendFailsAsFileLost(SqliteStore& store) {
    const DLMException e = errorOf([&] {
      store.extend(key_.key, token_, seconds(30), LockMode::EXCLUSIVE);
    });
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_NE(std::string(e.what()).find("deleted or replaced while in use"),
              std::string::npos)
        << e.what();
  }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  const StoreKey key_ = pathKey(kReplacedScope, "job");
  std::string token_;
};

// The WAL still holds every page (nothing was checkpointed): SQLite would
// go on from it as if the file were whole, and the holder would never hear.
TEST_F(SqliteFileReplacedTest, AFileTruncatedInPlaceEndsTheHoldsMadeThroughIt) {
  auto store = openStore(path_, seconds(1));
  holdWithTokenFour(*store);
  rewriteInPlace(path_, "");
  expectExtendFailsAsFileLost(*store);
  // The store goes on with what is in the file now (here SQLite's WAL put
  // the pages back when the store closed its connection), never below 4.
  const AcquireResult next =
      acquire(*store, key_, seconds(30), nullptr, "owner-2");
  if (next.acquired) {
    EXPECT_GT(next.fencingToken, 4);
  }
}

// Checkpointed first: the truncation really lost the rows. The holder hears
// at its next call; a new file made in place hands out tokens from 1 to new
// store objects, but never to this one, which saw 4.
TEST_F(SqliteFileReplacedTest, AFileTruncatedInPlaceNeverHandsATokenOutAgain) {
  auto store = openStore(path_, seconds(1));
  holdWithTokenFour(*store);
  checkpoint(path_);
  rewriteInPlace(path_, "");
  expectExtendFailsAsFileLost(*store);
  EXPECT_EQ(errorOf([&] {
              store->release(key_, token_, LockMode::EXCLUSIVE);
            }).code(),
            ErrorCode::SCHEMA_MISMATCH);  // an empty file now: no dlm tables

  auto fresh = openStore(path_, seconds(1));  // `dlmctl migrate`, in effect
  std::string token;
  const AcquireResult first = acquire(*fresh, key_, seconds(30), &token);
  ASSERT_TRUE(first.acquired);
  EXPECT_EQ(first.fencingToken, 1);  // a new store object knows no better
  ASSERT_TRUE(fresh->release(key_, token, LockMode::EXCLUSIVE));

  std::int64_t last = 4;
  for (int i = 0; i < 3; ++i) {
    const AcquireResult again = acquire(*store, key_, seconds(30), &token);
    ASSERT_TRUE(again.acquired);
    EXPECT_GT(again.fencingToken, last);
    last = again.fencingToken;
    ASSERT_TRUE(store->release(key_, token, LockMode::EXCLUSIVE));
  }
}

// Another lock file's bytes written over this one (a copy made elsewhere,
// `cat other.sqlite > locks.sqlite`): a valid dlm file whose rows are not
// the ones this store wrote. Its marker (the file's creation time, recorded
// with its first schema version) gives it away.
TEST_F(SqliteFileReplacedTest, AnotherFilesBytesWrittenOverItAreNoticed) {
  auto store = openStore(path_, seconds(1));
  holdWithTokenFour(*store);
  const std::string otherPath = dir_.file("other.sqlite");
  std::this_thread::sleep_for(milliseconds(5));  // a later creation time
  {
    auto other = openStore(otherPath);
    std::string token;
    ASSERT_EQ(acquire(*other, key_, seconds(30), &token).fencingToken, 1);
    ASSERT_TRUE(other->release(key_, token, LockMode::EXCLUSIVE));
  }
  checkpoint(path_);
  rewriteInPlace(path_, contentsOf(otherPath));
  expectExtendFailsAsFileLost(*store);
  // The store goes on in the file there now, whose row says 1, above 4.
  const AcquireResult next = acquire(*store, key_);
  ASSERT_TRUE(next.acquired);
  EXPECT_GT(next.fencingToken, 4);
}

// A file that shrinks the way SQLite shrinks it (VACUUM on a live file, then
// a checkpoint) is the same file: its holders go on.
TEST_F(SqliteFileReplacedTest, AFileShrunkByVacuumIsStillTheSameFile) {
  auto store = openStore(path_, seconds(1));
  holdWithTokenFour(*store);
  {
    RawDb raw(path_);
    raw.exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < 2000) INSERT INTO dlm_locks (resource, resource_crc) "
        "SELECT 'bulk-' || i || printf('%.200c', 'x'), 0 FROM n");
  }
  checkpoint(path_);
  // The store sees the grown file once.
  EXPECT_TRUE(store->extend(key_.key, token_, seconds(30), LockMode::EXCLUSIVE)
                  .has_value());
  const auto grown = std::filesystem::file_size(path_);
  {
    RawDb raw(path_);
    raw.exec("DELETE FROM dlm_locks WHERE resource LIKE 'bulk-%'");
    raw.exec("VACUUM");
  }
  checkpoint(path_);
  ASSERT_LT(std::filesystem::file_size(path_), grown);
  EXPECT_TRUE(store->extend(key_.key, token_, seconds(30), LockMode::EXCLUSIVE)
                  .has_value());
  EXPECT_TRUE(store->release(key_, token_, LockMode::EXCLUSIVE));
}

// Through the manager: a guard renewing a lock in a file truncated under it
// reports the loss at its next renewal (a third of its TTL), not never.
TEST_F(SqliteFileReplacedTest, AGuardLearnsOfATruncatedFileAtItsNextRenewal) {
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path_});
  store->initialize(true);
  auto m = DistributedLockManager::builder()
               .clientId("c")
               .farmId("f")
               .store(store)
               .build();
  m->initialize();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock, seconds(3));
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
  rewriteInPlace(path_, "");
  const auto start = std::chrono::steady_clock::now();
  while (!lost && std::chrono::steady_clock::now() - start < seconds(3)) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(lost.load()) << "the guard renewed on, untold, for 3 s";
  EXPECT_TRUE(guard.lost());
  // The renewal's error, or the loss report that follows it.
  std::lock_guard<std::mutex> l(whyMutex);
  EXPECT_TRUE(whyCode == ErrorCode::CONNECTION_ERROR ||
              whyCode == ErrorCode::LOCK_NOT_HELD)
      << why;
}

}  // namespace
}  // namespace dlm::sqlite_test
