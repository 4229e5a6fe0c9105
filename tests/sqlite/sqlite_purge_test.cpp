// SqliteStore::purgeIdle: which rows go, the batch size, dry runs, and the
// fencing floor that keeps a purged key's tokens going up when it comes
// back (also for rows that an older library or a tool inserts).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kBatch = 100;

class SqlitePurgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("purge.sqlite");
    store_ = openStore(path_);
  }

  // Acquires `id` with a 1 ms lease and releases it: after a few ms the row
  // is idle. Returns the acquisition's fencing token.
  std::int64_t acquireAndRelease(const std::string& id) {
    const StoreKey key = pathKey(kScope, id);
    std::string token;
    const AcquireResult r = acquire(*store_, key, milliseconds(1), &token);
    EXPECT_TRUE(r.acquired) << id << " blocked by " << r.blockedBy;
    EXPECT_TRUE(store_->release(key, token, dlm::LockMode::EXCLUSIVE));
    return r.fencingToken;
  }

  // Lets leases of 1 ms end and be idle for a few ms.
  static void letLeasesEnd() { std::this_thread::sleep_for(milliseconds(20)); }

  std::int64_t rowsInTable() {
    return std::stoll(RawDb(path_).scalar("SELECT count(*) FROM dlm_locks"));
  }

  static constexpr const char* kScope = "DC#farm#client#";
  TempDir dir_;
  std::string path_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqlitePurgeTest, AReCreatedKeyGetsATokenAboveEveryTokenItHadBefore) {
  EXPECT_EQ(acquireAndRelease("orders.1"), 1);
  EXPECT_EQ(acquireAndRelease("orders.1"), 2);
  EXPECT_EQ(acquireAndRelease("orders.1"), 3);
  letLeasesEnd();

  const PurgeBatch batch = store_->purgeIdle(milliseconds(5), kBatch, false);
  EXPECT_EQ(batch.rows, 2);  // orders.1 and its ancestor orders
  EXPECT_EQ(batch.fencingFloor, 3);
  EXPECT_EQ(rowsInTable(), 0);
  EXPECT_FALSE(store_->describe(std::string(kScope) + "orders.1").has_value());

  EXPECT_EQ(acquireAndRelease("orders.1"), 4);
  EXPECT_EQ(acquireAndRelease("orders.1"), 5);
  // A key never seen before starts at the floor too: tokens are per key, and
  // the floor only promises "above every purged token".
  EXPECT_EQ(acquireAndRelease("fresh"), 4);
}

TEST_F(SqlitePurgeTest, ADryRunCountsAndDeletesNothing) {
  acquireAndRelease("a");
  acquireAndRelease("b");
  acquireAndRelease("b");
  letLeasesEnd();

  const PurgeBatch dry = store_->purgeIdle(milliseconds(5), kBatch, true);
  EXPECT_EQ(dry.rows, 2);
  EXPECT_EQ(dry.fencingFloor, 0);  // unchanged
  EXPECT_EQ(rowsInTable(), 2);
  EXPECT_EQ(store_->describe(std::string(kScope) + "b")->fencingToken, 2);
  EXPECT_EQ(RawDb(path_).scalar("SELECT fencing_token FROM dlm_fencing_floor"),
            "0");
  // The dry run's count is bounded by the batch size like a purge.
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 1, true).rows, 1);

  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, false).rows, 2);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, true).fencingFloor, 2);
}

TEST_F(SqlitePurgeTest, ALiveWaiterKeepsItsRow) {
  acquireAndRelease("waited");
  acquireAndRelease("other");
  letLeasesEnd();
  const StoreKey waited = pathKey(kScope, "waited");
  ASSERT_TRUE(store_->registerWait(WaitRequest{waited, "waiter", seconds(30)})
                  .deadlockCycle.empty());

  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, true).rows, 1);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, false).rows, 1);
  EXPECT_TRUE(store_->describe(waited.key).has_value());
  EXPECT_FALSE(store_->describe(std::string(kScope) + "other").has_value());

  // Once the wait ends, the row is idle like any other.
  store_->unregisterWait(waited.key, "waiter");
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, false).rows, 1);
  EXPECT_EQ(rowsInTable(), 0);
}

TEST_F(SqlitePurgeTest, AnExpiredWaitDoesNotKeepARow) {
  acquireAndRelease("waited");
  const StoreKey waited = pathKey(kScope, "waited");
  ASSERT_TRUE(
      store_->registerWait(WaitRequest{waited, "waiter", milliseconds(1)})
          .deadlockCycle.empty());
  letLeasesEnd();  // the waiter's deadline passes too (it crashed)
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), kBatch, false).rows, 1);
}

TEST_F(SqlitePurgeTest, EachCallDeletesAtMostTheBatchSize) {
  for (const char* id : {"k1", "k2", "k3", "k4", "k5"}) acquireAndRelease(id);
  letLeasesEnd();
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 2, false).rows, 2);
  EXPECT_EQ(rowsInTable(), 3);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 2, false).rows, 2);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 2, false).rows, 1);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 2, false).rows, 0);
  EXPECT_EQ(rowsInTable(), 0);
}

TEST_F(SqlitePurgeTest, HeldLocksAndRecentlyIdleRowsStay) {
  const StoreKey held = pathKey(kScope, "held");
  ASSERT_TRUE(acquire(*store_, held, seconds(60)).acquired);
  // Released long before its lease would have ended: a release ends the
  // lease, so the row is idle from the release on.
  const StoreKey early = pathKey(kScope, "early");
  std::string token;
  ASSERT_TRUE(acquire(*store_, early, seconds(60), &token).acquired);
  ASSERT_TRUE(store_->release(early, token, dlm::LockMode::EXCLUSIVE));
  acquireAndRelease("recent");
  letLeasesEnd();

  // "recent" has been idle for ~20 ms, not for an hour.
  EXPECT_EQ(store_->purgeIdle(std::chrono::hours(1), kBatch, false).rows, 0);
  EXPECT_EQ(store_->purgeIdle(milliseconds(0), kBatch, false).rows, 2);
  EXPECT_TRUE(store_->describe(held.key)->held);
  EXPECT_FALSE(store_->describe(early.key).has_value());
  EXPECT_FALSE(store_->describe(std::string(kScope) + "recent").has_value());
}

TEST_F(SqlitePurgeTest, AnExpiredHeldLockIsIdle) {
  const StoreKey key = pathKey(kScope, "crashed");
  ASSERT_TRUE(acquire(*store_, key, milliseconds(1)).acquired);  // never freed
  letLeasesEnd();
  const PurgeBatch batch = store_->purgeIdle(milliseconds(5), kBatch, false);
  EXPECT_EQ(batch.rows, 1);
  EXPECT_EQ(batch.fencingFloor, 1);
  EXPECT_EQ(acquire(*store_, key).fencingToken, 2);
}

TEST_F(SqlitePurgeTest, PurgedAncestorsComeBackAboveTheirOldTokens) {
  EXPECT_EQ(acquireAndRelease("jobs"), 1);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 1);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 2);
  EXPECT_EQ(acquireAndRelease("jobs.nightly.step"), 1);
  letLeasesEnd();
  const PurgeBatch batch = store_->purgeIdle(milliseconds(5), kBatch, false);
  EXPECT_EQ(batch.rows, 3);
  EXPECT_EQ(batch.fencingFloor, 2);

  // The leaf re-creates its ancestors' rows, at the floor: they are intention
  // rows again (never acquired, so describe shows nothing)...
  EXPECT_EQ(acquireAndRelease("jobs.nightly.step"), 3);
  EXPECT_FALSE(store_->describe(std::string(kScope) + "jobs").has_value());
  // ...and their next acquisitions are above every token they had.
  EXPECT_EQ(acquireAndRelease("jobs"), 3);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 3);
}

TEST_F(SqlitePurgeTest, NeverAcquiredRowsAreIdleAtOnce) {
  // A held leaf: its ancestor row is an intention row, deleting it blocks
  // nothing less (the leaf is found by the descendant range scan).
  const StoreKey leaf = pathKey(kScope, "tree.leaf");
  ASSERT_TRUE(acquire(*store_, leaf, seconds(60)).acquired);
  EXPECT_EQ(store_->purgeIdle(std::chrono::hours(1), kBatch, false).rows, 1);
  EXPECT_TRUE(store_->describe(leaf.key)->held);
  const AcquireResult parent = acquire(*store_, pathKey(kScope, "tree"));
  EXPECT_FALSE(parent.acquired);
  EXPECT_EQ(parent.blockedBy, leaf.key);
}

TEST_F(SqlitePurgeTest, TheFloorNeverGoesDown) {
  acquireAndRelease("high");
  acquireAndRelease("high");
  acquireAndRelease("high");
  acquireAndRelease("low");
  letLeasesEnd();
  // Batches go in key order: "high" (token 3) first, then "low" (token 1).
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 1, false).fencingFloor, 3);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 1, false).fencingFloor, 3);
  EXPECT_EQ(rowsInTable(), 0);
  // Nor can a row start below it, whoever inserts it.
  RawDb(path_).exec(
      "INSERT INTO dlm_locks (resource, resource_crc, fencing_token) "
      "VALUES ('DC#farm#client#tool', 0, 1)");
  EXPECT_EQ(RawDb(path_).scalar("SELECT fencing_token FROM dlm_locks "
                                "WHERE resource = 'DC#farm#client#tool'"),
            "3");
}

TEST_F(SqlitePurgeTest, RowsThatAVersion2LibraryInsertsStartAtTheFloor) {
  acquireAndRelease("shared");
  acquireAndRelease("shared");
  letLeasesEnd();
  ASSERT_EQ(store_->purgeIdle(milliseconds(5), kBatch, false).fencingFloor, 2);
  // The previous release's tryAcquire, statement for statement: insert the
  // row if missing, read its token, take it with token + 1.
  RawDb old(path_);
  old.exec(
      "BEGIN IMMEDIATE;"
      "INSERT OR IGNORE INTO dlm_locks (resource, resource_crc) "
      "VALUES ('DC#farm#client#shared', 0);");
  const std::string read = old.scalar(
      "SELECT fencing_token FROM dlm_locks "
      "WHERE resource = 'DC#farm#client#shared'");
  EXPECT_EQ(read, "2");
  old.exec(
      "UPDATE dlm_locks SET status = 'HELD', owner_id = 'old', token = 't', "
      "fencing_token = " +
      std::to_string(std::stoll(read) + 1) +
      ", acquired_at_ms = 0, ttl_ms = 1, expires_at_ms = 1 "
      "WHERE resource = 'DC#farm#client#shared'; COMMIT;");
  EXPECT_EQ(store_->describe("DC#farm#client#shared")->fencingToken, 3);
}

TEST_F(SqlitePurgeTest, PurgingWhileOthersAcquireNeverRepeatsAToken) {
  // Three store objects (as three processes would have) acquire and release
  // keys with 20 ms leases while a fourth purges everything idle in
  // small batches. Every acquisition of a key must get a token no earlier
  // acquisition of that key had, purged or not.
  constexpr int kWorkers = 3;
  // Enough keys that each one sits idle for a while between acquisitions
  // (so the purger finds some), in trees so that ancestors come and go too.
  std::vector<std::string> ids;
  for (int n = 0; n < 12; ++n) {
    const std::string root = "g" + std::to_string(n);
    ids.insert(ids.end(), {root, root + ".a", root + ".b"});
  }
  std::mutex mutex;
  std::map<std::string, std::multiset<std::int64_t>> tokens;
  std::atomic<bool> stop{false};
  std::atomic<int> purged{0};
  std::vector<std::string> errors(kWorkers + 1);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      try {
        SqliteStore store(SqliteStoreOptions{path_, seconds(10)});
        for (int i = 0; !stop.load(); ++i) {
          const std::string& id =
              ids[static_cast<std::size_t>(i * 7 + w * 5) % ids.size()];
          const StoreKey key = pathKey(kScope, id);
          std::string token;
          const AcquireResult r = acquire(store, key, milliseconds(20), &token,
                                          "worker-" + std::to_string(w));
          if (!r.acquired) continue;
          {
            std::lock_guard<std::mutex> guard(mutex);
            tokens[key.key].insert(r.fencingToken);
          }
          store.release(key, token, dlm::LockMode::EXCLUSIVE);
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(w)] = e.what();
      }
    });
  }
  threads.emplace_back([&] {
    try {
      SqliteStore store(SqliteStoreOptions{path_, seconds(10)});
      while (!stop.load()) {
        purged +=
            static_cast<int>(store.purgeIdle(milliseconds(0), 2, false).rows);
        std::this_thread::sleep_for(milliseconds(5));
      }
    } catch (const std::exception& e) {
      errors[kWorkers] = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(1500));
  stop = true;
  for (auto& t : threads) t.join();
  for (const auto& error : errors) EXPECT_EQ(error, "");
  EXPECT_GT(purged.load(), 0) << "the run purged nothing: it tested nothing";
  std::size_t acquisitions = 0;
  for (const auto& [key, seen] : tokens) {
    acquisitions += seen.size();
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(),
              seen.size())
        << key << " got a token twice";
  }
  EXPECT_GT(acquisitions, 10U);
}

TEST_F(SqlitePurgeTest, NegativeAgeOrNonPositiveBatchIsInvalidArgument) {
  for (const auto& call : {std::make_pair(milliseconds(-1), 10),
                           std::make_pair(milliseconds(0), 0),
                           std::make_pair(milliseconds(0), -3)}) {
    for (const bool dry : {false, true}) {
      try {
        store_->purgeIdle(call.first, call.second, dry);
        FAIL() << "accepted " << call.first.count() << " ms, batch "
               << call.second;
      } catch (const DLMException& e) {
        EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace dlm::sqlite_test
