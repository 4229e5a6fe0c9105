// What the SQLite store's tables hold, seen from outside the store: request
// rows (the stored form of a key without hierarchy, expired rows deleted by
// the next registration) and the fencing floor against rows that a tool or a
// version-2 library inserts. The rules themselves are in tests/store_contract.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

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
