// What the SQLite store's tables hold, seen from outside the store: request
// rows (the stored form of a key without hierarchy, expired rows deleted by
// the next registration and by the purge) and the fencing floor against
// rows that a tool or a version-2 library inserts. The rules themselves are in
// tests/store_contract.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kScope = "DC#farm#client#";

class SqliteTableRows : public ::testing::Test {
 protected:
  void SetUp() override { store_ = openStore(path_); }

  // Acquires `id` with a 1 ms lease and releases it.
  void acquireAndRelease(const std::string& id) {
    const StoreKey key = pathKey(kScope, id);
    std::string token;
    ASSERT_TRUE(acquire(*store_, key, milliseconds(1), &token).acquired);
    ASSERT_TRUE(store_->release(key, token, LockMode::EXCLUSIVE));
  }
  static void letLeasesEnd() { std::this_thread::sleep_for(milliseconds(20)); }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteTableRows, AFlatKeysRequestRowHasNoAncestorsAndNullBounds) {
  StoreKey flat;
  flat.key = std::string(kScope) + "a.b";
  ASSERT_TRUE(store_->registerWait(WaitRequest{flat, "A", seconds(30)})
                  .deadlockCycle.empty());
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_lock_requests "
                                "WHERE descendants_begin IS NULL AND "
                                "descendants_end IS NULL AND ancestors = '[]'"),
            "1");
}

TEST_F(SqliteTableRows, ARegistrationDeletesExpiredRequestRows) {
  const StoreKey k1 = pathKey(kScope, "k1");
  const StoreKey k2 = pathKey(kScope, "k2");
  ASSERT_TRUE(store_->registerWait(WaitRequest{k2, "A", seconds(30)})
                  .deadlockCycle.empty());
  // A's wait for k2 passed its deadline (A crashed while waiting).
  RawDb(path_).exec("UPDATE dlm_lock_requests SET expires_at_ms = 1");
  ASSERT_TRUE(store_->registerWait(WaitRequest{k1, "B", seconds(30)})
                  .deadlockCycle.empty());
  EXPECT_EQ(RawDb(path_).rows("SELECT owner_id, resource FROM "
                              "dlm_lock_requests"),
            std::vector<std::string>{"B|" + k1.key});
}

TEST_F(SqliteTableRows, APurgeDeletesEndedRequestRowsAndKeepsLiveOnes) {
  // Straight into the table: a crashed waiter's request (its lease ended
  // long ago) and a live one. No registerWait in between, which would
  // sweep the ended one itself.
  RawDb(path_).exec(
      "INSERT INTO dlm_lock_requests (resource, owner_id, requested_at_ms, "
      "expires_at_ms) VALUES "
      "('DC#farm#client#gone', 'crashed', 1, 2), "
      "('DC#farm#client#live', 'waiting', 1, 9000000000000)");
  const std::string requests =
      "SELECT owner_id FROM dlm_lock_requests ORDER BY owner_id";

  // A dry run counts it and deletes nothing.
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 100, true).rows, 1);
  EXPECT_EQ(RawDb(path_).rows(requests),
            (std::vector<std::string>{"crashed", "waiting"}));
  // Not ended for an hour yet? It ended in 1970: it goes.
  EXPECT_EQ(store_->purgeIdle(std::chrono::hours(1), 100, false).rows, 1);
  EXPECT_EQ(RawDb(path_).rows(requests), std::vector<std::string>{"waiting"});
  EXPECT_EQ(store_->purgeIdle(milliseconds(0), 100, false).rows, 0);
  EXPECT_EQ(RawDb(path_).rows(requests), std::vector<std::string>{"waiting"});
}

TEST_F(SqliteTableRows, EndedRequestsRecentlyEndedStayUntilIdleForPassed) {
  const std::int64_t now =
      std::chrono::duration_cast<milliseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  RawDb(path_).exec(
      "INSERT INTO dlm_lock_requests (resource, owner_id, requested_at_ms, "
      "expires_at_ms) VALUES ('DC#farm#client#just', 'crashed', 1, " +
      std::to_string(now - 10) + ")");
  EXPECT_EQ(store_->purgeIdle(std::chrono::hours(1), 100, false).rows, 0);
  EXPECT_EQ(store_->purgeIdle(milliseconds(0), 100, false).rows, 1);
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_lock_requests"), "0");
}

TEST_F(SqliteTableRows, EndedRequestsCountAgainstTheBatchFirst) {
  // Five ended requests, one idle key row, one stale SHARED hold.
  RawDb(path_).exec(
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
      "WHERE i < 5) INSERT INTO dlm_lock_requests (resource, owner_id, "
      "requested_at_ms, expires_at_ms) SELECT 'DC#farm#client#r' || i, "
      "'crashed', 1, 1 + i FROM n;"
      "INSERT INTO dlm_shared_holds (resource, token, owner_id, "
      "fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) VALUES "
      "('DC#farm#client#s', 't', 'o', 1, 0, 1, 1)");
  acquireAndRelease("idle");
  letLeasesEnd();
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 3, true).rows, 3);
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 100, true).rows, 7);
  // The oldest three requests, then the other two and the hold and the
  // key row.
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 3, false).rows, 3);
  EXPECT_EQ(
      RawDb(path_).rows("SELECT resource FROM dlm_lock_requests "
                        "ORDER BY resource"),
      (std::vector<std::string>{"DC#farm#client#r4", "DC#farm#client#r5"}));
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 3, false).rows, 3);
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_lock_requests"), "0");
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_shared_holds"), "0");
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 3, false).rows, 1);
  EXPECT_FALSE(store_->describe("DC#farm#client#idle").has_value());
}

TEST_F(SqliteTableRows, ADryRunLeavesTheFloorTableAlone) {
  acquireAndRelease("a");
  letLeasesEnd();
  EXPECT_EQ(store_->purgeIdle(milliseconds(5), 100, true).rows, 1);
  EXPECT_EQ(RawDb(path_).scalar("SELECT fencing_token FROM dlm_fencing_floor"),
            "0");
}

TEST_F(SqliteTableRows, ARowInsertedByAToolStartsAtTheFloor) {
  acquireAndRelease("high");
  acquireAndRelease("high");
  acquireAndRelease("high");
  letLeasesEnd();
  ASSERT_EQ(store_->purgeIdle(milliseconds(5), 100, false).fencingFloor, 3);
  RawDb(path_).exec(
      "INSERT INTO dlm_locks (resource, resource_crc, fencing_token) "
      "VALUES ('DC#farm#client#tool', 0, 1)");
  EXPECT_EQ(RawDb(path_).scalar("SELECT fencing_token FROM dlm_locks "
                                "WHERE resource = 'DC#farm#client#tool'"),
            "3");
}

TEST_F(SqliteTableRows, RowsThatAVersion2LibraryInsertsStartAtTheFloor) {
  acquireAndRelease("shared");
  acquireAndRelease("shared");
  letLeasesEnd();
  ASSERT_EQ(store_->purgeIdle(milliseconds(5), 100, false).fencingFloor, 2);
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

}  // namespace
}  // namespace dlm::sqlite_test
