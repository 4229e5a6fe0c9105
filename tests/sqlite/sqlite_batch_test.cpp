// SqliteStore's batch calls (tryAcquireEach, releaseEach, extendEach,
// tryAcquireAll): each lock answered as the single call answers it, in the
// requests' order; a lock refused by a cap of its own gets that error with
// nothing written for it while the others go on; all or none for
// tryAcquireAll; a busy file fails the whole batch by the deadline; and a
// batch commits one transaction, counted in the WAL file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"
#include "support/random_token.h"

namespace dlm::sqlite_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

const std::string kBatchScope = "DC#farm#client#";
const Holder kBatchHolder{"test-host", 1};

// The transactions committed to a WAL file so far: its commit frames (a
// frame whose "database size after commit" field is not 0) among the valid
// frames, those carrying the header's salts. Every write transaction that
// changed a page appends exactly one commit frame; a transaction that
// changed nothing appends none. (SQLite's WAL format: a 32-byte header with
// the page size at byte 8 and the salts at 16, then frames of a 24-byte
// header, commit size at 4 and salts at 8, followed by one page.)
int batchWalCommits(const std::string& walPath) {
  std::ifstream in(walPath, std::ios::binary);
  const std::string wal((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  if (wal.size() < 32) return 0;
  const auto u32 = [&](std::size_t at) {
    const auto* b = reinterpret_cast<const unsigned char*>(wal.data() + at);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
           (std::uint32_t{b[2]} << 8) | std::uint32_t{b[3]};
  };
  std::uint32_t pageSize = u32(8);
  if (pageSize == 1) pageSize = 65536;  // how the format writes 64 KiB
  const std::uint32_t salt1 = u32(16);
  const std::uint32_t salt2 = u32(20);
  int commits = 0;
  for (std::size_t at = 32; at + 24 + pageSize <= wal.size();
       at += 24 + pageSize) {
    if (u32(at + 8) != salt1 || u32(at + 12) != salt2) break;
    if (u32(at + 4) != 0) ++commits;
  }
  return commits;
}

// Records the keys a store announces as released.
class BatchWakeRecorder : public ReleaseListener {
 public:
  void released(std::string_view key) override {
    std::lock_guard<std::mutex> guard(mutex_);
    keys_.emplace_back(key);
  }
  void missedReleases() override {}
  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> guard(mutex_);
    return keys_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> keys_;
};

class SqliteBatchCalls : public ::testing::Test {
 protected:
  void SetUp() override { store_ = openStore(path_); }

  // A key that lives as long as the test (requests refer to it).
  const StoreKey& key(const std::string& id) {
    keys_.push_back(pathKey(kBatchScope, id));
    return keys_.back();
  }
  // A fresh token that lives as long as the test.
  const std::string& token() {
    tokens_.push_back(test::randomToken());
    return tokens_.back();
  }
  AcquireRequest request(const StoreKey& k, const std::string& tok,
                         std::string_view owner = "owner-1",
                         milliseconds ttl = seconds(30),
                         LockMode mode = LockMode::EXCLUSIVE) {
    return AcquireRequest{k, owner, tok, ttl, kBatchHolder, mode};
  }

  // The DBA's statement, on a connection of its own.
  void dba(const std::string& sql) { RawDb(path_).exec(sql); }
  std::string sql(const std::string& query) {
    return RawDb(path_).scalar(query);
  }
  // How many rows dlm_locks has for `k`.
  int lockRows(const StoreKey& k) {
    return std::stoi(
        sql("SELECT count(*) FROM dlm_locks WHERE resource = '" + k.key + "'"));
  }
  bool held(const StoreKey& k) {
    const auto record = store_->describe(k.key);
    return record && record->held;
  }

  TempDir dir_;
  const std::string path_ = dir_.file("locks.sqlite");
  std::unique_ptr<SqliteStore> store_;
  std::deque<StoreKey> keys_;
  std::deque<std::string> tokens_;
};

TEST_F(SqliteBatchCalls, TryAcquireEachAnswersEveryLockAsTheSingleCallWould) {
  const StoreKey& free1 = key("free1");
  const StoreKey& free2 = key("free2");
  const StoreKey& taken = key("taken");
  const StoreKey& tooLong = key("toolong");
  // A SHARED request over the cap of live holders: refused after its rows
  // (the key's and its ancestor's) were made, so the savepoint must undo
  // them.
  const StoreKey& crowded = key("crowd.x");
  const StoreKey& crowdedParent = key("crowd");
  dba("UPDATE dlm_limits SET max_ttl_ms = 60000, "
      "max_shared_holders_per_key = 1");
  dba("INSERT INTO dlm_shared_holds (resource, token, owner_id, "
      "fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) VALUES ('" +
      crowded.key + "', 'other-token', 'other-owner', 1, 0, 1, 9000000000000)");
  std::string takenToken;
  ASSERT_TRUE(
      acquire(*store_, taken, seconds(30), &takenToken, "owner-2").acquired);

  const std::vector<AcquireRequest> requests{
      request(tooLong, token(), "owner-1", seconds(120)),
      request(free2, token()),
      request(taken, token()),
      request(crowded, token(), "owner-1", seconds(30), LockMode::SHARED),
      request(free1, token()),
  };
  const auto outcomes = store_->tryAcquireEach(requests);
  ASSERT_EQ(outcomes.size(), requests.size());

  // Over max_ttl_ms: its own INVALID_ARGUMENT, nothing written.
  ASSERT_TRUE(outcomes[0].error.has_value());
  EXPECT_EQ(outcomes[0].error->code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(std::string(outcomes[0].error->what()).find("max_ttl_ms"),
            std::string::npos)
      << outcomes[0].error->what();
  EXPECT_FALSE(outcomes[0].result.acquired);
  EXPECT_EQ(lockRows(tooLong), 0);
  // Free keys: acquired, each its first fencing token and a lease.
  for (const std::size_t i : {std::size_t{1}, std::size_t{4}}) {
    EXPECT_FALSE(outcomes[i].error.has_value()) << i;
    EXPECT_TRUE(outcomes[i].result.acquired) << i;
    EXPECT_EQ(outcomes[i].result.fencingToken, 1) << i;
    EXPECT_GT(outcomes[i].result.expiresAt, outcomes[i].result.acquiredAt);
    const auto record = store_->describe(requests[i].key.key);
    ASSERT_TRUE(record.has_value()) << i;
    EXPECT_TRUE(record->held) << i;
    EXPECT_EQ(record->fencingToken, outcomes[i].result.fencingToken) << i;
    EXPECT_EQ(record->owner, "owner-1") << i;
  }
  // Held by another owner: not acquired, blocked by the key itself.
  EXPECT_FALSE(outcomes[2].error.has_value());
  EXPECT_FALSE(outcomes[2].result.acquired);
  EXPECT_FALSE(outcomes[2].result.queued);
  EXPECT_EQ(outcomes[2].result.blockedBy, taken.key);
  EXPECT_EQ(store_->describe(taken.key)->owner, "owner-2");
  // Over max_shared_holders_per_key: its own error; the rows its attempt
  // made for the key and its ancestor are gone, the one hold is left.
  ASSERT_TRUE(outcomes[3].error.has_value());
  EXPECT_EQ(outcomes[3].error->code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NE(
      std::string(outcomes[3].error->what()).find("max_shared_holders_per_key"),
      std::string::npos)
      << outcomes[3].error->what();
  EXPECT_EQ(lockRows(crowded), 0);
  EXPECT_EQ(lockRows(crowdedParent), 0);
  EXPECT_EQ(sql("SELECT count(*) FROM dlm_shared_holds"), "1");
}

TEST_F(SqliteBatchCalls, LocksOfOneBatchGoInKeyOrderAndSeeEachOther) {
  // The child comes first in the request, the parent first in key order:
  // the parent is granted, then the child finds it in its way, as two
  // single calls in that order would.
  const StoreKey& child = key("p.c");
  const StoreKey& parent = key("p");
  const StoreKey& shared = key("s");
  const std::vector<AcquireRequest> requests{
      request(child, token(), "owner-2"),
      request(parent, token(), "owner-1"),
      request(shared, token(), "owner-1", seconds(30), LockMode::SHARED),
      request(shared, token(), "owner-2", seconds(30), LockMode::SHARED),
  };
  const auto outcomes = store_->tryAcquireEach(requests);
  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_FALSE(outcomes[0].result.acquired);
  EXPECT_EQ(outcomes[0].result.blockedBy, parent.key);
  EXPECT_TRUE(outcomes[1].result.acquired);
  // Two SHARED holders of one key: both granted, each its own token.
  EXPECT_TRUE(outcomes[2].result.acquired);
  EXPECT_TRUE(outcomes[3].result.acquired);
  EXPECT_EQ(outcomes[2].result.fencingToken, 1);
  EXPECT_EQ(outcomes[3].result.fencingToken, 2);
  EXPECT_EQ(store_->holdersOf(shared.key).size(), 2u);
}

TEST_F(SqliteBatchCalls, AcquiringTheSameTokenAgainInABatchIsAnsweredAsHeld) {
  const StoreKey& k = key("retry");
  std::string first;
  const AcquireResult single = acquire(*store_, k, seconds(30), &first);
  ASSERT_TRUE(single.acquired);
  const auto outcomes = store_->tryAcquireEach({request(k, first)});
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].result.acquired);
  EXPECT_EQ(outcomes[0].result.fencingToken, single.fencingToken);
  EXPECT_EQ(outcomes[0].result.expiresAt, single.expiresAt);
}

TEST_F(SqliteBatchCalls, ReleaseEachFreesTheHeldAndNotTheTakenOver) {
  const StoreKey& lost = key("lost");
  const StoreKey& kept = key("kept");
  const StoreKey& sharedKey = key("shared");
  std::string oldToken;
  std::string newToken;
  std::string keptToken;
  std::string sharedToken;
  ASSERT_TRUE(acquire(*store_, lost, milliseconds(1), &oldToken).acquired);
  std::this_thread::sleep_for(milliseconds(20));  // the lease ends
  ASSERT_TRUE(
      acquire(*store_, lost, seconds(30), &newToken, "owner-2").acquired);
  ASSERT_TRUE(acquire(*store_, kept, seconds(30), &keptToken).acquired);
  sharedToken = test::randomToken();
  ASSERT_TRUE(store_
                  ->tryAcquire(request(sharedKey, sharedToken, "owner-1",
                                       seconds(30), LockMode::SHARED))
                  .acquired);
  BatchWakeRecorder listener;
  ASSERT_TRUE(store_->subscribeReleases(&listener));

  const auto outcomes = store_->releaseEach({
      ReleaseRequest{lost, oldToken, LockMode::EXCLUSIVE},
      ReleaseRequest{sharedKey, sharedToken, LockMode::SHARED},
      ReleaseRequest{kept, keptToken, LockMode::EXCLUSIVE},
  });
  store_->unsubscribeReleases(&listener);
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_FALSE(outcomes[0].released);
  EXPECT_TRUE(outcomes[1].released);
  EXPECT_TRUE(outcomes[2].released);
  for (const auto& outcome : outcomes) EXPECT_FALSE(outcome.error.has_value());
  // The new holder keeps the taken-over lock; the others are free.
  const auto record = store_->describe(lost.key);
  ASSERT_TRUE(record.has_value());
  EXPECT_TRUE(record->held);
  EXPECT_EQ(record->owner, "owner-2");
  EXPECT_FALSE(held(kept));
  EXPECT_TRUE(store_->holdersOf(sharedKey.key).empty());
  // Woken as single releases wake: each key this batch freed, not the key
  // it did not free.
  auto woken = listener.keys();
  std::sort(woken.begin(), woken.end());
  EXPECT_EQ(woken, (std::vector<std::string>{kept.key, sharedKey.key}));

  // Released again (a retry after a lost reply): EXCLUSIVE is true again,
  // SHARED false (a released SHARED hold leaves nothing), as release says.
  const auto again = store_->releaseEach({
      ReleaseRequest{kept, keptToken, LockMode::EXCLUSIVE},
      ReleaseRequest{sharedKey, sharedToken, LockMode::SHARED},
  });
  EXPECT_TRUE(again[0].released);
  EXPECT_FALSE(again[1].released);
}

TEST_F(SqliteBatchCalls, ExtendEachExtendsTheHeldAndAnswersNulloptForTheLost) {
  const StoreKey& lost = key("lost");
  const StoreKey& kept = key("kept");
  std::string oldToken;
  std::string keptToken;
  ASSERT_TRUE(acquire(*store_, lost, milliseconds(1), &oldToken).acquired);
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_TRUE(acquire(*store_, lost, seconds(30), nullptr, "owner-2").acquired);
  const AcquireResult keptHold = acquire(*store_, kept, seconds(5), &keptToken);
  ASSERT_TRUE(keptHold.acquired);
  dba("UPDATE dlm_limits SET max_ttl_ms = 600000");

  const auto outcomes = store_->extendEach({
      ExtendRequest{kept.key, keptToken, seconds(300), LockMode::EXCLUSIVE},
      ExtendRequest{lost.key, oldToken, seconds(300), LockMode::EXCLUSIVE},
      // Over the cap: its own error, its expiry left as it was.
      ExtendRequest{kept.key, keptToken, seconds(1200), LockMode::EXCLUSIVE},
  });
  ASSERT_EQ(outcomes.size(), 3u);
  ASSERT_TRUE(outcomes[0].expiresAt.has_value());
  EXPECT_FALSE(outcomes[0].error.has_value());
  EXPECT_GT(*outcomes[0].expiresAt, keptHold.expiresAt + seconds(200));
  EXPECT_FALSE(outcomes[1].expiresAt.has_value());
  EXPECT_FALSE(outcomes[1].error.has_value());
  ASSERT_TRUE(outcomes[2].error.has_value());
  EXPECT_EQ(outcomes[2].error->code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_FALSE(outcomes[2].expiresAt.has_value());
  EXPECT_EQ(store_->describe(kept.key)->expiresAt, *outcomes[0].expiresAt);
  EXPECT_EQ(store_->describe(lost.key)->owner, "owner-2");
}

TEST_F(SqliteBatchCalls, TryAcquireAllTakesEveryLockOrNone) {
  const StoreKey& a = key("a");
  const StoreKey& b = key("b");
  const StoreKey& c = key("c");
  std::string bToken;
  const AcquireResult bFirst =
      acquire(*store_, b, seconds(30), &bToken, "owner-2");
  ASSERT_TRUE(bFirst.acquired);

  // b is held elsewhere: none taken, and nothing of a or c written.
  const auto refused = store_->tryAcquireAll(
      {request(c, token()), request(b, token()), request(a, token())});
  EXPECT_FALSE(refused.acquired);
  EXPECT_EQ(refused.blockedBy, b.key);
  EXPECT_FALSE(refused.queued);
  EXPECT_EQ(lockRows(a), 0);
  EXPECT_EQ(lockRows(c), 0);
  EXPECT_EQ(store_->describe(b.key)->owner, "owner-2");

  // b freed: all three taken, each with its own next fencing token, the
  // results in the requests' order.
  ASSERT_TRUE(store_->release(b, bToken, LockMode::EXCLUSIVE));
  const auto all = store_->tryAcquireAll(
      {request(c, token()), request(b, token()), request(a, token())});
  ASSERT_TRUE(all.acquired);
  ASSERT_EQ(all.results.size(), 3u);
  EXPECT_EQ(all.results[0].fencingToken, 1);
  EXPECT_EQ(all.results[1].fencingToken, bFirst.fencingToken + 1);
  EXPECT_EQ(all.results[2].fencingToken, 1);
  const StoreKey* inOrder[] = {&c, &b, &a};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(all.results[i].acquired) << i;
    const auto record = store_->describe(inOrder[i]->key);
    ASSERT_TRUE(record.has_value()) << i;
    EXPECT_TRUE(record->held) << i;
    EXPECT_EQ(record->fencingToken, all.results[i].fencingToken) << i;
  }
}

TEST_F(SqliteBatchCalls, TryAcquireAllThrowsTheErrorOfAnyLockAndTakesNone) {
  const StoreKey& a = key("a");
  const StoreKey& z = key("z");
  dba("UPDATE dlm_limits SET max_ttl_ms = 60000");
  const DLMException e = test::errorOf([&] {
    store_->tryAcquireAll(
        {request(z, token(), "owner-1", seconds(120)), request(a, token())});
  });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
  // a came first in key order and was granted before z failed: rolled
  // back with the rest.
  EXPECT_EQ(lockRows(a), 0);
  EXPECT_EQ(lockRows(z), 0);
}

TEST_F(SqliteBatchCalls, ABatchOnABusyFileFailsTransientByTheDeadline) {
  // A busy timeout far beyond the deadline: only the deadline can end the
  // waits in time.
  store_ = openStore(path_, seconds(60));
  const StoreKey& held1 = key("held");
  std::string heldToken;
  ASSERT_TRUE(acquire(*store_, held1, seconds(30), &heldToken).acquired);
  const StoreKey& fresh = key("fresh");
  RawDb other(path_);
  other.exec("BEGIN IMMEDIATE");  // the file's write lock, kept

  const std::vector<std::pair<std::string, std::function<void()>>> calls{
      {"tryAcquireEach",
       [&] { store_->tryAcquireEach({request(fresh, token())}); }},
      {"releaseEach",
       [&] {
         store_->releaseEach(
             {ReleaseRequest{held1, heldToken, LockMode::EXCLUSIVE}});
       }},
      {"extendEach",
       [&] {
         store_->extendEach({ExtendRequest{held1.key, heldToken, seconds(30),
                                           LockMode::EXCLUSIVE}});
       }},
      {"tryAcquireAll",
       [&] { store_->tryAcquireAll({request(fresh, token())}); }},
  };
  for (const auto& [name, call] : calls) {
    const auto started = steady_clock::now();
    const DLMException e = test::errorOf([&] {
      const DeadlineScope scope(deadlineAfter(milliseconds(300)));
      call();
    });
    const auto waited = steady_clock::now() - started;
    EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << name << e.what();
    EXPECT_TRUE(e.transient()) << name;
    EXPECT_NE(std::string(e.what()).find("the call's deadline"),
              std::string::npos)
        << name << ": " << e.what();
    // Ended by the deadline, not the minute of busy timeout (generous slack
    // for a loaded machine).
    EXPECT_LT(waited, seconds(20)) << name;
  }
  other.exec("ROLLBACK");
  // Nothing of the failed batches was written, and the store works on.
  EXPECT_EQ(lockRows(fresh), 0);
  EXPECT_TRUE(held(held1));
  const auto outcomes = store_->tryAcquireEach({request(fresh, token())});
  EXPECT_TRUE(outcomes[0].result.acquired);
}

TEST_F(SqliteBatchCalls, ABatchCommitsOneTransaction) {
  const std::string wal = path_ + "-wal";
  std::vector<const StoreKey*> batchKeys;
  std::vector<const StoreKey*> singleKeys;
  for (int i = 0; i < 5; ++i) {
    batchKeys.push_back(&key("batch" + std::to_string(i)));
    singleKeys.push_back(&key("single" + std::to_string(i)));
  }
  const int before = batchWalCommits(wal);

  // Five single acquisitions: five commits (the count sees each one).
  for (const StoreKey* k : singleKeys) {
    ASSERT_TRUE(acquire(*store_, *k).acquired);
  }
  const int afterSingles = batchWalCommits(wal);
  EXPECT_EQ(afterSingles - before, 5);

  // The same work as a batch of each kind: one commit each.
  std::vector<AcquireRequest> requests;
  for (const StoreKey* k : batchKeys) requests.push_back(request(*k, token()));
  const auto acquired = store_->tryAcquireEach(requests);
  for (const auto& outcome : acquired) ASSERT_TRUE(outcome.result.acquired);
  const int afterAcquire = batchWalCommits(wal);
  EXPECT_EQ(afterAcquire - afterSingles, 1);

  std::vector<ExtendRequest> extensions;
  for (const auto& r : requests) {
    extensions.push_back(
        ExtendRequest{r.key.key, r.token, seconds(60), LockMode::EXCLUSIVE});
  }
  for (const auto& outcome : store_->extendEach(extensions)) {
    ASSERT_TRUE(outcome.expiresAt.has_value());
  }
  const int afterExtend = batchWalCommits(wal);
  EXPECT_EQ(afterExtend - afterAcquire, 1);

  std::vector<ReleaseRequest> releases;
  for (const auto& r : requests) {
    releases.push_back(ReleaseRequest{r.key, r.token, LockMode::EXCLUSIVE});
  }
  for (const auto& outcome : store_->releaseEach(releases)) {
    ASSERT_TRUE(outcome.released);
  }
  const int afterRelease = batchWalCommits(wal);
  EXPECT_EQ(afterRelease - afterExtend, 1);

  std::vector<AcquireRequest> again;
  for (const StoreKey* k : batchKeys) again.push_back(request(*k, token()));
  ASSERT_TRUE(store_->tryAcquireAll(again).acquired);
  EXPECT_EQ(batchWalCommits(wal) - afterRelease, 1);
}

}  // namespace
}  // namespace dlm::sqlite_test
