// purgeIdle and the fencing floor: which rows go (idle ones, not held, not
// waited for, not recently idle), batch sizes, dry runs, and tokens that
// never go back when a purged key returns. Each test has a database of its
// own, since a purge looks at every row.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kBatch = 100;
constexpr milliseconds kIdle{5};

class Purge : public StoreContract {
 protected:
  void SetUp() override { freshDatabase(); }

  // Rows for `keys` keys and, where the store keeps them, `intention`
  // never-acquired ancestor rows.
  std::int64_t rowsFor(int keys, int intention) const {
    return keys + (traits().intentionRows ? intention : 0);
  }
};

TEST_P(Purge, AReCreatedKeyGetsATokenAboveEveryTokenItHadBefore) {
  EXPECT_EQ(acquireAndRelease("orders.1"), 1);
  EXPECT_EQ(acquireAndRelease("orders.1"), 2);
  EXPECT_EQ(acquireAndRelease("orders.1"), 3);
  letLeasesEnd();

  const PurgeBatch batch = purge(store(), kIdle, kBatch, false);
  EXPECT_EQ(batch.rows, rowsFor(1, 1));  // orders.1 and its ancestor orders
  EXPECT_EQ(batch.fencingFloor, 3);
  EXPECT_FALSE(describe(store(), key("orders.1").key).has_value());
  EXPECT_EQ(purge(store(), milliseconds(0), kBatch, true).rows, 0);

  EXPECT_EQ(acquireAndRelease("orders.1"), 4);
  EXPECT_EQ(acquireAndRelease("orders.1"), 5);
  // A key never seen before starts above the floor too: tokens are per key,
  // and the floor only promises "above every purged token".
  EXPECT_EQ(acquireAndRelease("fresh"), 4);
}

TEST_P(Purge, ADryRunCountsAndDeletesNothing) {
  acquireAndRelease("a");
  acquireAndRelease("b");
  acquireAndRelease("b");
  letLeasesEnd();

  const PurgeBatch dry = purge(store(), kIdle, kBatch, true);
  EXPECT_EQ(dry.rows, 2);
  EXPECT_EQ(dry.fencingFloor, 0);  // unchanged
  EXPECT_EQ(describe(store(), key("b").key)->fencingToken, 2);
  // The dry run's count is bounded by the batch size like a purge.
  EXPECT_EQ(purge(store(), kIdle, 1, true).rows, 1);
  EXPECT_EQ(purge(store(), kIdle, kBatch, true).rows, 2);

  EXPECT_EQ(purge(store(), kIdle, kBatch, false).rows, 2);
  EXPECT_EQ(purge(store(), kIdle, kBatch, true).fencingFloor, 2);
}

TEST_P(Purge, EachCallDeletesAtMostTheBatchSize) {
  for (int i = 0; i < 7; ++i) acquireAndRelease("k" + std::to_string(i));
  letLeasesEnd();
  EXPECT_EQ(purge(store(), kIdle, 3, true).rows, 3);
  std::vector<std::int64_t> batches;
  for (;;) {
    const PurgeBatch b = purge(store(), kIdle, 3, false);
    batches.push_back(b.rows);
    if (b.rows < 3) break;
  }
  EXPECT_EQ(batches, (std::vector<std::int64_t>{3, 3, 1}));
  EXPECT_EQ(purge(store(), milliseconds(0), kBatch, true).rows, 0);
}

TEST_P(Purge, ALiveWaiterKeepsItsRow) {
  acquireAndRelease("waited");
  acquireAndRelease("other");
  letLeasesEnd();
  EXPECT_EQ(wait("waited", "W"), Ids{});

  EXPECT_EQ(purge(store(), kIdle, kBatch, true).rows, 1);
  EXPECT_EQ(purge(store(), kIdle, kBatch, false).rows, 1);
  EXPECT_TRUE(describe(store(), key("waited").key).has_value());
  EXPECT_FALSE(describe(store(), key("other").key).has_value());

  // Once the wait ends, the row is idle like any other.
  unregister("waited", "W");
  EXPECT_EQ(purge(store(), kIdle, kBatch, false).rows, 1);
  EXPECT_FALSE(describe(store(), key("waited").key).has_value());
}

TEST_P(Purge, AnExpiredWaitDoesNotKeepARow) {
  acquireAndRelease("waited");
  EXPECT_EQ(wait("waited", "W", milliseconds(1)), Ids{});
  letLeasesEnd();  // the waiter's deadline passes too (it crashed)
  // The row, and (PostgreSQL) the ended request itself.
  EXPECT_GE(purge(store(), kIdle, kBatch, false).rows, 1);
  EXPECT_FALSE(describe(store(), key("waited").key).has_value());
  EXPECT_EQ(waiting(), Ids{});
}

TEST_P(Purge, HeldLocksAndRecentlyIdleRowsStay) {
  ASSERT_TRUE(acquire("held", "H", "th", seconds(60)).acquired);
  // Released long before its lease would have ended: a release ends the
  // lease, so the row is idle from the release on.
  ASSERT_TRUE(acquire("early", "E", "te", seconds(60)).acquired);
  ASSERT_TRUE(release("early", "te"));
  acquireAndRelease("recent");
  letLeasesEnd();

  // Not idle for an hour yet: nothing goes.
  EXPECT_EQ(purge(store(), hours(1), kBatch, false).rows, 0);
  EXPECT_EQ(purge(store(), milliseconds(0), kBatch, false).rows, 2);
  EXPECT_TRUE(describe(store(), key("held").key)->held);
  EXPECT_FALSE(describe(store(), key("early").key).has_value());
  EXPECT_FALSE(describe(store(), key("recent").key).has_value());
}

TEST_P(Purge, AnExpiredHeldLockIsIdle) {
  ASSERT_TRUE(acquire("crashed", "C", "tc", kShort).acquired);  // never freed
  letLeasesEnd();
  const PurgeBatch batch = purge(store(), kIdle, kBatch, false);
  EXPECT_EQ(batch.rows, 1);
  EXPECT_EQ(batch.fencingFloor, 1);
  EXPECT_EQ(acquire("crashed", "D", "td").fencingToken, 2);
}

TEST_P(Purge, NeverAcquiredRowsAreIdleAtOnce) {
  // A held leaf: its ancestor's row is an intention row; deleting it blocks
  // nothing less (the leaf is found by the descendant range).
  ASSERT_TRUE(acquire("tree.leaf", "A", "ta", seconds(60)).acquired);
  EXPECT_EQ(purge(store(), hours(1), kBatch, false).rows, rowsFor(0, 1));
  EXPECT_TRUE(describe(store(), key("tree.leaf").key)->held);
  const AcquireResult parent = acquire("tree", "B", "tb");
  EXPECT_FALSE(parent.acquired);
  EXPECT_EQ(parent.blockedBy, key("tree.leaf").key);
}

TEST_P(Purge, PurgedAncestorsComeBackAboveTheirOldTokens) {
  EXPECT_EQ(acquireAndRelease("jobs"), 1);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 1);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 2);
  EXPECT_EQ(acquireAndRelease("jobs.nightly.step"), 1);
  letLeasesEnd();
  const PurgeBatch batch = purge(store(), kIdle, kBatch, false);
  EXPECT_EQ(batch.rows, 3);
  EXPECT_EQ(batch.fencingFloor, 2);

  // The leaf re-creates its ancestors' rows as never acquired (describe
  // shows nothing)...
  EXPECT_EQ(acquireAndRelease("jobs.nightly.step"), 3);
  EXPECT_FALSE(describe(store(), key("jobs").key).has_value());
  // ...and their next acquisitions are above every token they had.
  EXPECT_EQ(acquireAndRelease("jobs"), 3);
  EXPECT_EQ(acquireAndRelease("jobs.nightly"), 3);
}

TEST_P(Purge, TheFloorNeverGoesDown) {
  acquireAndRelease("high");
  acquireAndRelease("high");
  acquireAndRelease("high");
  acquireAndRelease("low");
  letLeasesEnd();
  // One row per batch, in whatever order: the floor only rises.
  const std::int64_t first = purge(store(), kIdle, 1, false).fencingFloor;
  const std::int64_t second = purge(store(), kIdle, 1, false).fencingFloor;
  EXPECT_GE(first, 1);
  EXPECT_EQ(second, 3);
  EXPECT_EQ(purge(store(), kIdle, 1, false).fencingFloor, 3);
  // A purge of lower tokens leaves it where it is.
  EXPECT_EQ(acquireAndRelease("low"), 4);
  letLeasesEnd();
  EXPECT_EQ(purge(store(), kIdle, kBatch, false).fencingFloor, 4);
  acquireAndRelease("other");
  EXPECT_EQ(purge(store(), milliseconds(0), kBatch, true).fencingFloor, 4);
}

TEST_P(Purge, StaleSharedHoldsGoAndKeysWithLiveOnesStay) {
  // "gone": only a stale hold. "kept": a stale hold and a live one.
  ASSERT_TRUE(acquireShared("gone", "A", "t1", kShort).acquired);
  ASSERT_TRUE(acquireShared("kept", "A", "t2", kShort).acquired);
  const AcquireResult kept = acquireShared("kept", "B", "live", seconds(60));
  ASSERT_TRUE(kept.acquired);
  letLeasesEnd();

  // Two stale holds and the key row of "gone", where holds are rows.
  const std::int64_t rows = traits().sharedHoldRows ? 3 : 1;
  EXPECT_EQ(purge(store(), milliseconds(0), kBatch, true).rows, rows);
  const PurgeBatch batch = purge(store(), milliseconds(0), kBatch, false);
  EXPECT_EQ(batch.rows, rows);
  EXPECT_EQ(holdersOf(store(), key("gone").key).size(), 0U);
  const auto holders = holdersOf(store(), key("kept").key);
  ASSERT_FALSE(holders.empty());
  EXPECT_EQ(holders.back().owner, listedOwner("B"));
  if (traits().sharedHoldRows) {
    EXPECT_EQ(holders.size(), 1U);
  }
  EXPECT_TRUE(extend("kept", "live", seconds(60), LockMode::SHARED));
  // The purged key comes back above every token it issued.
  const AcquireResult back = acquireShared("gone", "C", "t3");
  ASSERT_TRUE(back.acquired);
  EXPECT_GT(back.fencingToken, 1);
  EXPECT_GE(batch.fencingFloor, 1);
}

TEST_P(Purge, SharedHoldsNotIdleLongEnoughStay) {
  ASSERT_TRUE(acquireShared("k", "A", "t1", kShort).acquired);
  letLeasesEnd();
  EXPECT_EQ(purge(store(), hours(1), kBatch, false).rows, 0);
  const auto holders = holdersOf(store(), key("k").key);
  ASSERT_EQ(holders.size(), 1U);
  EXPECT_FALSE(holders[0].held);
}

TEST_P(Purge, PurgingWhileOthersAcquireNeverRepeatsAToken) {
  // Store objects (as other processes would have) acquire and release keys
  // with short leases while another purges everything idle in small
  // batches: every acquisition of a key gets a token no earlier acquisition
  // of that key had, purged or not (above every earlier one), and nothing
  // fails but transiently.
  constexpr int kWorkers = 2;
  std::vector<std::string> ids;
  for (int n = 0; n < 6; ++n) {
    const std::string root = "g" + std::to_string(n);
    ids.insert(ids.end(), {root, root + ".a", root + ".b"});
  }
  std::mutex mutex;
  std::map<std::string, std::multiset<std::int64_t>> tokens;
  std::atomic<bool> stop{false};
  std::atomic<int> purged{0};
  std::atomic<int> regressions{0};
  std::vector<std::string> errors(kWorkers + 1);
  std::vector<std::thread> threads;
  const Holder holder{"h", 1};
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w, s = otherStore()] {
      const std::string who = owner("worker-" + std::to_string(w));
      std::map<std::string, std::int64_t> last;
      for (int i = 0; !stop.load(); ++i) {
        const StoreKey k = key(ids[static_cast<std::size_t>(i * 7 + w * 5) %
                                   ids.size()]);
        const std::string token = who + "-" + std::to_string(i);
        try {
          const AcquireResult r = s->tryAcquire(
              AcquireRequest{k, who, token, milliseconds(20), holder});
          if (!r.acquired) continue;
          // Each worker sees every key's tokens grow.
          if (r.fencingToken <= last[k.key]) ++regressions;
          last[k.key] = r.fencingToken;
          {
            std::lock_guard<std::mutex> guard(mutex);
            tokens[k.key].insert(r.fencingToken);
          }
          s->release(k, token, LockMode::EXCLUSIVE);
        } catch (const DLMException& e) {
          if (!e.transient()) errors[static_cast<std::size_t>(w)] = e.what();
        }
      }
    });
  }
  threads.emplace_back([&, s = otherStore()] {
    while (!stop.load()) {
      try {
        purged += static_cast<int>(purge(*s, milliseconds(0), 2, false).rows);
      } catch (const DLMException& e) {
        if (!e.transient()) errors[kWorkers] = e.what();
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  std::this_thread::sleep_for(milliseconds(1500));
  stop = true;
  for (auto& t : threads) t.join();
  for (const auto& error : errors) EXPECT_EQ(error, "");
  EXPECT_EQ(regressions.load(), 0);
  EXPECT_GT(purged.load(), 0) << "the run purged nothing: it tested nothing";
  std::size_t acquisitions = 0;
  for (const auto& [k, seen] : tokens) {
    acquisitions += seen.size();
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(),
              seen.size())
        << k << " got a token twice";
  }
  EXPECT_GT(acquisitions, 10U);
}

TEST_P(Purge, NegativeAgeOrNonPositiveBatchIsInvalidArgument) {
  for (const auto& call : {std::make_pair(milliseconds(-1), 10),
                           std::make_pair(milliseconds(0), 0),
                           std::make_pair(milliseconds(0), -3)}) {
    for (const bool dry : {false, true}) {
      EXPECT_EQ(codeOf([&] { purge(store(), call.first, call.second, dry); }),
                ErrorCode::INVALID_ARGUMENT)
          << call.first.count() << " ms, batch " << call.second
          << (dry ? ", dry" : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, Purge, ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
