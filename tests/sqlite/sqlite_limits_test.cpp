// The caps of dlm_limits on SQLite (schema version 5): each call over one is
// refused with INVALID_ARGUMENT and a message naming the limit and its value
// ("dlm: <what> (limit <column> = <value>)"), one just under it goes
// through, and a DBA's UPDATE of the table applies to the next call of a
// store that is already open. Rows that would take thousands of calls to
// make (SHARED holders, requests) are written straight into the tables.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/error.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kScope = "DC#farm#client#";
constexpr std::int64_t kMaxTtlMs = 31536000000;  // the default, 365 days
const Holder kHolder{"test-host", 1};

// An id of `segments` segments "s0.s1...": the key and segments - 1
// ancestors.
std::string idOfSegments(int segments) {
  std::string id = "s0";
  for (int i = 1; i < segments; ++i) id += ".s" + std::to_string(i);
  return id;
}

class SqliteLimits : public ::testing::Test {
 protected:
  void SetUp() override { store_ = openStore(path_); }

  // The DBA's statement, on a connection of its own.
  void dba(const std::string& sql) { RawDb(path_).exec(sql); }

  AcquireResult tryAcquire(const StoreKey& key, milliseconds ttl, LockMode mode,
                           const std::string& token,
                           const std::string& owner = "owner-1") {
    return store_->tryAcquire(
        AcquireRequest{key, owner, token, ttl, kHolder, mode});
  }

  // `call` throws INVALID_ARGUMENT whose message is exactly `message`.
  static void expectRefused(const std::function<void()>& call,
                            const std::string& message) {
    try {
      call();
      ADD_FAILURE() << "not refused; expected: " << message;
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
      EXPECT_EQ(std::string(e.what()), message);
    }
  }

  // `call` throws INVALID_ARGUMENT whose message contains `part`; returns
  // the message.
  static std::string expectRefusedWith(const std::function<void()>& call,
                                       const std::string& part) {
    try {
      call();
      ADD_FAILURE() << "not refused; expected: " << part;
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << e.what();
      return e.what();
    }
    return "";
  }

  // `n` live SHARED holds of `key` by other owners, straight into the table.
  void writeSharedHolds(const std::string& key, int n,
                        std::int64_t expiresAt = 9000000000000) {
    dba("INSERT OR IGNORE INTO dlm_locks (resource, resource_crc) VALUES ('" +
        key +
        "', 0);"
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < " +
        std::to_string(n) +
        ") INSERT INTO dlm_shared_holds (resource, token, owner_id, "
        "fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) SELECT '" +
        key + "', 'junk-' || i || '-' || " + std::to_string(expiresAt) +
        ", 'other-' || i, 1, 0, 1, " + std::to_string(expiresAt) + " FROM n");
  }

  // `n` request rows of `owner` for keys "<scope>r<i>", straight into the
  // table.
  void writeRequests(const std::string& owner, int n,
                     std::int64_t expiresAt = 9000000000000) {
    dba("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
        "WHERE i < " +
        std::to_string(n) +
        ") INSERT INTO dlm_lock_requests (resource, owner_id, "
        "requested_at_ms, expires_at_ms) SELECT '" +
        std::string(kScope) + "r' || i || '-' || " + std::to_string(expiresAt) +
        ", '" + owner + "', 1, " + std::to_string(expiresAt) + " FROM n");
  }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  std::unique_ptr<SqliteStore> store_;
};

// --- max_ttl_ms --------------------------------------------------------------

TEST_F(SqliteLimits, AnAcquireOverTheMaxTtlIsRefusedInBothModes) {
  const StoreKey key = pathKey(kScope, "ttl");
  for (const LockMode mode : {LockMode::EXCLUSIVE, LockMode::SHARED}) {
    expectRefused(
        [&] { tryAcquire(key, milliseconds(kMaxTtlMs + 1), mode, "t-over"); },
        "dlm: a TTL of 31536000001 ms (limit max_ttl_ms = 31536000000)");
    expectRefused(
        [&] { tryAcquire(key, milliseconds(40000000000), mode, "t-over"); },
        "dlm: a TTL of 40000000000 ms (limit max_ttl_ms = 31536000000)");
  }
  // Nothing was written for the refused calls.
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_locks"), "0");
  // At the cap: granted, in either mode (the SHARED one on another key).
  EXPECT_TRUE(tryAcquire(key, milliseconds(kMaxTtlMs), LockMode::EXCLUSIVE,
                         "t-exclusive")
                  .acquired);
  EXPECT_TRUE(tryAcquire(pathKey(kScope, "ttl-shared"), milliseconds(kMaxTtlMs),
                         LockMode::SHARED, "t-shared")
                  .acquired);
}

TEST_F(SqliteLimits, AnExtensionOverTheMaxTtlIsRefusedInBothModes) {
  const StoreKey exclusive = pathKey(kScope, "x");
  const StoreKey shared = pathKey(kScope, "s");
  ASSERT_TRUE(
      tryAcquire(exclusive, seconds(5), LockMode::EXCLUSIVE, "tx").acquired);
  ASSERT_TRUE(tryAcquire(shared, seconds(5), LockMode::SHARED, "ts").acquired);
  for (const auto& [key, token, mode] :
       {std::make_tuple(exclusive.key, "tx", LockMode::EXCLUSIVE),
        std::make_tuple(shared.key, "ts", LockMode::SHARED)}) {
    expectRefused(
        [&] { store_->extend(key, token, milliseconds(kMaxTtlMs + 1), mode); },
        "dlm: a TTL of 31536000001 ms (limit max_ttl_ms = 31536000000)");
    EXPECT_TRUE(
        store_->extend(key, token, milliseconds(kMaxTtlMs), mode).has_value());
  }
}

// --- max_key_bytes -----------------------------------------------------------

TEST_F(SqliteLimits, AKeyOverTheMaxKeyBytesIsRefused) {
  // A flat key (no ancestors) of 8,193 bytes, then of exactly 8,192.
  const std::string scope(kScope);
  StoreKey over;
  over.key = scope + std::string(8193 - scope.size(), 'k');
  const std::string message = expectRefusedWith(
      [&] { tryAcquire(over, seconds(5), LockMode::EXCLUSIVE, "t1"); },
      " has 8193 bytes (limit max_key_bytes = 8192)");
  EXPECT_EQ(message.rfind("dlm: key \"DC#farm#client#kkk", 0), 0U) << message;
  // The key is shortened: the message stays one short line.
  EXPECT_LT(message.size(), 200U) << message;

  StoreKey at;
  at.key = scope + std::string(8192 - scope.size(), 'k');
  EXPECT_TRUE(tryAcquire(at, seconds(5), LockMode::SHARED, "t2").acquired);
}

TEST_F(SqliteLimits, TheKeyInARefusalIsEscapedAndShortened) {
  StoreKey key;
  key.key = std::string(kScope) + "line\nbreak\"quote" + std::string(9000, 'z');
  const std::string message = expectRefusedWith(
      [&] { tryAcquire(key, seconds(5), LockMode::EXCLUSIVE, "t"); },
      "(limit max_key_bytes = 8192)");
  EXPECT_NE(message.find("line\\x0Abreak\\x22quote"), std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("zzz...\" has "), std::string::npos) << message;
  EXPECT_LT(message.size(), 200U) << message;
}

// --- max_keys_per_call -------------------------------------------------------

TEST_F(SqliteLimits, AnAcquireTouchingMoreThanMaxKeysPerCallIsRefused) {
  const StoreKey over = pathKey(kScope, idOfSegments(65));
  ASSERT_EQ(over.ancestors.size(), 64U);
  for (const LockMode mode : {LockMode::EXCLUSIVE, LockMode::SHARED}) {
    expectRefused([&] { tryAcquire(over, seconds(5), mode, "t-over"); },
                  "dlm: 65 keys in one call (limit max_keys_per_call = 64)");
  }
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_locks"), "0");
  EXPECT_TRUE(tryAcquire(pathKey(kScope, idOfSegments(64)), seconds(5),
                         LockMode::EXCLUSIVE, "t-at")
                  .acquired);
}

TEST_F(SqliteLimits, TheManagerPassesTheRefusalOnUnchanged) {
  auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path_});
  auto manager = DistributedLockManager::builder()
                     .clientId("client")
                     .farmId("farm")
                     .store(store)
                     .build();
  manager->initialize();
  Lock lock = manager->getLockInstance(idOfSegments(65), LockLevel::DC);
  expectRefused([&] { manager->tryAcquireLock(lock); },
                "dlm: 65 keys in one call (limit max_keys_per_call = 64)");
  EXPECT_FALSE(lock.isAcquired());
  Lock fits = manager->getLockInstance(idOfSegments(64), LockLevel::DC);
  EXPECT_NO_THROW(manager->tryAcquireLock(fits));
  EXPECT_TRUE(manager->releaseLock(fits));
  manager->destroy();
}

// --- max_shared_holders_per_key ----------------------------------------------

TEST_F(SqliteLimits, TheSharedHolderOverTheCapIsRefused) {
  const StoreKey key = pathKey(kScope, "popular");
  writeSharedHolds(key.key, 999);
  // The 1,000th holder is granted.
  ASSERT_TRUE(tryAcquire(key, seconds(5), LockMode::SHARED, "t-1000", "o-1000")
                  .acquired);
  // The 1,001st is not.
  expectRefused(
      [&] {
        tryAcquire(key, seconds(5), LockMode::SHARED, "t-1001", "o-1001");
      },
      "dlm: key \"DC#farm#client#popular\" has 1000 live SHARED holders "
      "(limit max_shared_holders_per_key = 1000)");
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_shared_holds"),
            "1000");
  // A retry of a holder is still answered as held.
  const AcquireResult retry =
      tryAcquire(key, seconds(5), LockMode::SHARED, "t-1000", "o-1000");
  EXPECT_TRUE(retry.acquired);
  // Expired holds do not count.
  dba("UPDATE dlm_shared_holds SET expires_at_ms = 1 "
      "WHERE token = 'junk-1-9000000000000'");
  EXPECT_TRUE(tryAcquire(key, seconds(5), LockMode::SHARED, "t-1001", "o-1001")
                  .acquired);
  // Another key is not concerned.
  EXPECT_TRUE(tryAcquire(pathKey(kScope, "quiet"), seconds(5), LockMode::SHARED,
                         "t-q", "o-1001")
                  .acquired);
}

// --- max_requests_per_owner --------------------------------------------------

TEST_F(SqliteLimits, AnOwnerWithTooManyLiveRequestsIsRefusedAnotherOne) {
  writeRequests("W", 99);
  // The 100th request is recorded.
  const StoreKey hundredth = pathKey(kScope, "hundredth");
  ASSERT_TRUE(store_->registerWait(WaitRequest{hundredth, "W", seconds(10)})
                  .deadlockCycle.empty());
  // The 101st is not; the message does not show the owner (a secret).
  const StoreKey more = pathKey(kScope, "more");
  expectRefused(
      [&] {
        store_->registerWait(WaitRequest{more, "W", seconds(10)});
      },
      "dlm: owner has 100 live requests (limit max_requests_per_owner = 100)");
  EXPECT_EQ(RawDb(path_).scalar("SELECT count(*) FROM dlm_lock_requests "
                                "WHERE resource = '" +
                                more.key + "'"),
            "0");
  // Renewing a request the owner has is not one more.
  EXPECT_TRUE(store_->registerWait(WaitRequest{hundredth, "W", seconds(10)})
                  .deadlockCycle.empty());
  // Another owner is not concerned.
  EXPECT_TRUE(store_->registerWait(WaitRequest{more, "V", seconds(10)})
                  .deadlockCycle.empty());
  // Ended requests do not count.
  dba("UPDATE dlm_lock_requests SET expires_at_ms = 1 "
      "WHERE owner_id = 'W' AND resource <> '" +
      hundredth.key + "'");
  EXPECT_TRUE(store_->registerWait(WaitRequest{more, "W", seconds(10)})
                  .deadlockCycle.empty());
}

// --- a DBA's change ----------------------------------------------------------

TEST_F(SqliteLimits, ADbaUpdateAppliesToTheNextCall) {
  const StoreKey key = pathKey(kScope, "a.b.c");

  // max_ttl_ms: lowered, then raised.
  dba("UPDATE dlm_limits SET max_ttl_ms = 1000");
  expectRefused(
      [&] { tryAcquire(key, milliseconds(1001), LockMode::EXCLUSIVE, "t1"); },
      "dlm: a TTL of 1001 ms (limit max_ttl_ms = 1000)");
  dba("UPDATE dlm_limits SET max_ttl_ms = 2000");
  std::string token = "t2";
  ASSERT_TRUE(
      tryAcquire(key, milliseconds(1001), LockMode::EXCLUSIVE, token).acquired);
  expectRefused(
      [&] {
        store_->extend(key.key, token, milliseconds(2001), LockMode::EXCLUSIVE);
      },
      "dlm: a TTL of 2001 ms (limit max_ttl_ms = 2000)");
  ASSERT_TRUE(store_->release(key, token, LockMode::EXCLUSIVE));

  // max_keys_per_call: a.b.c touches three keys.
  dba("UPDATE dlm_limits SET max_keys_per_call = 2");
  expectRefused([&] { tryAcquire(key, seconds(1), LockMode::EXCLUSIVE, "t3"); },
                "dlm: 3 keys in one call (limit max_keys_per_call = 2)");
  dba("UPDATE dlm_limits SET max_keys_per_call = 3");
  ASSERT_TRUE(tryAcquire(key, seconds(1), LockMode::SHARED, "t4").acquired);

  // max_shared_holders_per_key: one holder now (t4).
  dba("UPDATE dlm_limits SET max_shared_holders_per_key = 1");
  expectRefused(
      [&] { tryAcquire(key, seconds(1), LockMode::SHARED, "t5", "o5"); },
      "dlm: key \"DC#farm#client#a.b.c\" has 1 live SHARED holders "
      "(limit max_shared_holders_per_key = 1)");
  dba("UPDATE dlm_limits SET max_shared_holders_per_key = 2");
  EXPECT_TRUE(
      tryAcquire(key, seconds(1), LockMode::SHARED, "t5", "o5").acquired);

  // max_key_bytes.
  dba("UPDATE dlm_limits SET max_key_bytes = 20");
  expectRefused(
      [&] {
        tryAcquire(pathKey(kScope, "abcdef"), seconds(1), LockMode::EXCLUSIVE,
                   "t6");
      },
      "dlm: key \"DC#farm#client#abcdef\" has 21 bytes "
      "(limit max_key_bytes = 20)");
  dba("UPDATE dlm_limits SET max_key_bytes = 21");
  EXPECT_TRUE(tryAcquire(pathKey(kScope, "abcdef"), seconds(1),
                         LockMode::EXCLUSIVE, "t6")
                  .acquired);

  // max_requests_per_owner.
  dba("UPDATE dlm_limits SET max_requests_per_owner = 1");
  ASSERT_TRUE(
      store_->registerWait(WaitRequest{pathKey(kScope, "w1"), "W", seconds(5)})
          .deadlockCycle.empty());
  expectRefused(
      [&] {
        store_->registerWait(
            WaitRequest{pathKey(kScope, "w2"), "W", seconds(5)});
      },
      "dlm: owner has 1 live requests (limit max_requests_per_owner = 1)");
  dba("UPDATE dlm_limits SET max_requests_per_owner = 2");
  EXPECT_TRUE(
      store_->registerWait(WaitRequest{pathKey(kScope, "w2"), "W", seconds(5)})
          .deadlockCycle.empty());
}

TEST_F(SqliteLimits, TheTableRefusesALimitThatIsNotPositiveOrASecondRow) {
  EXPECT_THROW(dba("UPDATE dlm_limits SET max_ttl_ms = 0"), std::runtime_error);
  EXPECT_THROW(dba("UPDATE dlm_limits SET max_shared_holders_per_key = -1"),
               std::runtime_error);
  EXPECT_THROW(dba("INSERT INTO dlm_limits (id) VALUES (2)"),
               std::runtime_error);
  EXPECT_EQ(RawDb(path_).rows("SELECT * FROM dlm_limits"),
            std::vector<std::string>{"1|31536000000|8192|64|100|1000"});
}

}  // namespace
}  // namespace dlm::sqlite_test
