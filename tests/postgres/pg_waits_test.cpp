// PostgresStore's waiting side: registerWait / unregisterWait (the wait-for
// graph and deadlock cycles, serialised in the server) and release
// notifications (NOTIFY dlm_release, one listening connection and thread per
// store). Everything runs as a dlm_client-only role.
#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_issue3_support.h"
#include "postgres/release_channel.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

using Keys = std::vector<std::string>;

// ------------------------------------------------------------ registerWait

class WaitGraphTest : public ::testing::Test {
 protected:
  WaitGraphTest() : store_(stores_.newStore()) {}

  // Live request rows as "owner waits for key", in order.
  std::vector<std::string> requestRows() {
    pqxx::nontransaction tx(stores_.admin());
    std::vector<std::string> rows;
    for (const auto& r :
         tx.exec("SELECT owner_id || ' waits for ' || resource FROM " +
                 stores_.table("dlm_lock_requests") + " ORDER BY 1")) {
      rows.push_back(r[0].as<std::string>());
    }
    return rows;
  }

  ClientStores stores_;
  std::unique_ptr<PostgresStore> store_;
};

TEST_F(WaitGraphTest, WaitingWithNobodyInTheWayRecordsTheRequest) {
  const StoreKey key = pathKey("g#", "a.b");
  EXPECT_EQ(waitAs(*store_, key, "A").deadlockCycle, Keys{});
  EXPECT_EQ(requestRows(), Keys{"A waits for g#a.b"});
  // Registering again replaces the row; unregistering removes it.
  EXPECT_EQ(waitAs(*store_, key, "A").deadlockCycle, Keys{});
  EXPECT_EQ(requestRows(), Keys{"A waits for g#a.b"});
  store_->unregisterWait(key.key, "A");
  store_->unregisterWait(key.key, "A");  // nothing left: no error
  EXPECT_EQ(requestRows(), Keys{});
}

TEST_F(WaitGraphTest, TwoOwnersWaitingForEachOtherCloseACycle) {
  const StoreKey k1 = pathKey("g#", "k1"), k2 = pathKey("g#", "k2");
  ASSERT_TRUE(acquireAs(*store_, k1, "A", "ta").acquired);
  ASSERT_TRUE(acquireAs(*store_, k2, "B", "tb").acquired);
  EXPECT_EQ(waitAs(*store_, k2, "A").deadlockCycle, Keys{});
  // B holds k2, which A waits for; A holds k1.
  EXPECT_EQ(waitAs(*store_, k1, "B").deadlockCycle, (Keys{"g#k1", "g#k2"}));
  // The refused wait was not recorded.
  EXPECT_EQ(requestRows(), Keys{"A waits for g#k2"});
  // Once A gives up waiting, B may wait.
  store_->unregisterWait(k2.key, "A");
  EXPECT_EQ(waitAs(*store_, k1, "B").deadlockCycle, Keys{});
}

TEST_F(WaitGraphTest, ThreeOwnersInARingGiveTheKeysInWaitOrder) {
  const StoreKey k1 = pathKey("g#", "k1"), k2 = pathKey("g#", "k2"),
                 k3 = pathKey("g#", "k3");
  ASSERT_TRUE(acquireAs(*store_, k1, "A", "ta").acquired);
  ASSERT_TRUE(acquireAs(*store_, k2, "B", "tb").acquired);
  ASSERT_TRUE(acquireAs(*store_, k3, "C", "tc").acquired);
  EXPECT_EQ(waitAs(*store_, k2, "A").deadlockCycle, Keys{});
  EXPECT_EQ(waitAs(*store_, k3, "B").deadlockCycle, Keys{});
  // C waits for k1 (held by A), A for k2 (B), B for k3 (C's own).
  EXPECT_EQ(waitAs(*store_, k1, "C").deadlockCycle,
            (Keys{"g#k1", "g#k2", "g#k3"}));
}

TEST_F(WaitGraphTest, WaitingForWhatTheCallerHoldsIsACycleOfOne) {
  ASSERT_TRUE(acquireAs(*store_, pathKey("g#", "a.b"), "A", "ta").acquired);
  // The key itself, an ancestor of it, a descendant of it.
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "a.b"), "A").deadlockCycle,
            Keys{"g#a.b"});
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "a"), "A").deadlockCycle,
            Keys{"g#a"});
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "a.b.c"), "A").deadlockCycle,
            Keys{"g#a.b.c"});
  // A sibling is not blocked by it.
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "a.c"), "A").deadlockCycle, Keys{});
  EXPECT_EQ(requestRows(), Keys{"A waits for g#a.c"});
}

TEST_F(WaitGraphTest, HoldingAChildBlocksAWaiterOnTheParent) {
  ASSERT_TRUE(acquireAs(*store_, pathKey("g#", "a.b"), "B", "tb").acquired);
  ASSERT_TRUE(acquireAs(*store_, pathKey("g#", "x"), "A", "ta").acquired);
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "x"), "B").deadlockCycle, Keys{});
  // A waits for a, whose child a.b B holds; B waits for x, which A holds.
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "a"), "A").deadlockCycle,
            (Keys{"g#a", "g#x"}));
}

TEST_F(WaitGraphTest, HoldingAParentBlocksAWaiterOnTheChildAndViceVersa) {
  ASSERT_TRUE(acquireAs(*store_, pathKey("g#", "p"), "B", "tb").acquired);
  ASSERT_TRUE(acquireAs(*store_, pathKey("g#", "q.r.s"), "A", "ta").acquired);
  // B waits for q.r, an ancestor of A's q.r.s; A waits for p.x, under B's p.
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "q.r"), "B").deadlockCycle, Keys{});
  EXPECT_EQ(waitAs(*store_, pathKey("g#", "p.x"), "A").deadlockCycle,
            (Keys{"g#p.x", "g#q.r"}));
}

TEST_F(WaitGraphTest, ExpiredRequestsAreIgnoredAndDeleted) {
  const StoreKey k1 = pathKey("g#", "k1"), k2 = pathKey("g#", "k2");
  ASSERT_TRUE(acquireAs(*store_, k1, "A", "ta").acquired);
  ASSERT_TRUE(acquireAs(*store_, k2, "B", "tb").acquired);
  // A crashed waiter's row: A's wait for k2 ended 50 ms after it began.
  EXPECT_EQ(waitAs(*store_, k2, "A", 50ms).deadlockCycle, Keys{});
  const StoreTime expired = store_->now() + 50ms;
  ASSERT_TRUE(eventually([&] { return store_->now() > expired; }));
  EXPECT_EQ(waitAs(*store_, k1, "B").deadlockCycle, Keys{});
  EXPECT_EQ(requestRows(), Keys{"B waits for g#k1"});
}

TEST_F(WaitGraphTest, ExpiredHoldsAreIgnored) {
  const StoreKey k1 = pathKey("g#", "k1"), k2 = pathKey("g#", "k2");
  const AcquireResult a = acquireAs(*store_, k1, "A", "ta", 100ms);
  ASSERT_TRUE(a.acquired);
  ASSERT_TRUE(acquireAs(*store_, k2, "B", "tb").acquired);
  EXPECT_EQ(waitAs(*store_, k2, "A").deadlockCycle, Keys{});
  ASSERT_TRUE(eventually([&] { return store_->now() > a.expiresAt; }));
  // A's hold on k1 has expired (nobody took it yet): it blocks nobody.
  EXPECT_EQ(waitAs(*store_, k1, "B").deadlockCycle, Keys{});
}

TEST_F(WaitGraphTest, OppositeWaitsRegisteredAtOnceFindTheCycleExactlyOnce) {
  auto other = stores_.newStore();
  constexpr int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    const StoreKey ka = pathKey("race#", fmt::format("a{}", round));
    const StoreKey kb = pathKey("race#", fmt::format("b{}", round));
    ASSERT_TRUE(acquireAs(*store_, ka, "A", "ta").acquired);
    ASSERT_TRUE(acquireAs(*other, kb, "B", "tb").acquired);
    std::atomic<int> ready{0};
    Keys cycles[2];
    std::string errors[2];
    auto side = [&](int i, LockStore& s, const StoreKey& want,
                    const std::string& owner) {
      ++ready;
      while (ready < 2) std::this_thread::yield();
      try {
        cycles[i] = waitAs(s, want, owner).deadlockCycle;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    };
    std::thread ta(side, 0, std::ref(*store_), kb, "A");
    std::thread tb(side, 1, std::ref(*other), ka, "B");
    ta.join();
    tb.join();
    ASSERT_EQ(errors[0], "");
    ASSERT_EQ(errors[1], "");
    ASSERT_EQ(cycles[0].empty() + cycles[1].empty(), 1)
        << "round " << round << ": " << ::testing::PrintToString(cycles[0])
        << " / " << ::testing::PrintToString(cycles[1]);
    EXPECT_EQ(requestRows().size(), 1u);
    store_->unregisterWait(kb.key, "A");
    store_->unregisterWait(ka.key, "B");
    ASSERT_TRUE(store_->release(ka, "ta", dlm::LockMode::EXCLUSIVE));
    ASSERT_TRUE(store_->release(kb, "tb", dlm::LockMode::EXCLUSIVE));
  }
}

TEST_F(WaitGraphTest, BadArgumentsAreInternalErrorsNotSilentRows) {
  EXPECT_EQ(codeOf([&] { waitAs(*store_, pathKey("g#", "k"), "A", -1ms); }),
            ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(requestRows(), Keys{});
}

// ---------------------------------------------------------- notifications

class ReleaseNotifyTest : public ::testing::Test {
 protected:
  ReleaseNotifyTest()
      : scope_(uniqueName("n") + "#"),
        app_(uniqueName("dlm_listen")),
        store_(stores_.newStore("application_name=" + app_)),
        other_(stores_.newStore()) {}

  ~ReleaseNotifyTest() override { store_->unsubscribeReleases(&listener_); }

  StoreKey key(const std::string& id) { return pathKey(scope_, id); }

  // Someone waits for `k`, held by another owner, then it is released
  // through the other store object (as another process would).
  void releaseWithWaiter(const StoreKey& k, const std::string& waiter = "W") {
    ASSERT_TRUE(acquireAs(*other_, k, "H", "th").acquired);
    ASSERT_EQ(waitAs(*other_, k, waiter).deadlockCycle, Keys{});
    ASSERT_TRUE(other_->release(k, "th", dlm::LockMode::EXCLUSIVE));
  }

  // Backends of this test's store that are LISTENing.
  std::vector<int> listeningBackends() {
    pqxx::nontransaction tx(stores_.admin());
    std::vector<int> pids;
    for (const auto& r : tx.exec_params(
             "SELECT pid FROM pg_stat_activity WHERE application_name = $1 "
             "AND query LIKE 'LISTEN%'",
             app_)) {
      pids.push_back(r[0].as<int>());
    }
    return pids;
  }

  ClientStores stores_;
  const std::string scope_;
  const std::string app_;
  std::unique_ptr<PostgresStore> store_;
  std::unique_ptr<PostgresStore> other_;
  RecordingListener listener_;
};

TEST_F(ReleaseNotifyTest, ReleaseByAnotherStoreReachesASubscribedListener) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  const StoreKey k = key("jobs.nightly");
  releaseWithWaiter(k);
  EXPECT_TRUE(listener_.waitFor(k.key));
  EXPECT_EQ(listener_.missed(), 0);
}

TEST_F(ReleaseNotifyTest, WaitersOnAncestorsAndDescendantsAreWokenSiblingsNot) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  RawListener raw;
  // Held first: a waiter's request would hold back a newer acquisition
  // (fair queueing).
  for (const char* id : {"a.b", "s.y"}) {
    ASSERT_TRUE(acquireAs(*other_, key(id), "H", "th").acquired);
  }
  // Waiters on a (ancestor of a.b), a.b.c (descendant) and a.x (sibling).
  ASSERT_EQ(waitAs(*other_, key("a"), "W1").deadlockCycle, Keys{});
  ASSERT_EQ(waitAs(*other_, key("a.b.c"), "W2").deadlockCycle, Keys{});
  ASSERT_EQ(waitAs(*other_, key("s.x"), "W3").deadlockCycle, Keys{});
  ASSERT_TRUE(other_->release(key("a.b"), "th", dlm::LockMode::EXCLUSIVE));
  ASSERT_TRUE(other_->release(
      key("s.y"), "th", dlm::LockMode::EXCLUSIVE));  // only a sibling waits
  const std::string marker = releaseMarker(*other_, scope_);
  EXPECT_EQ(raw.until(marker), Keys{key("a.b").key});
  EXPECT_TRUE(listener_.waitFor(marker));
  EXPECT_TRUE(listener_.seen(key("a.b").key));
  EXPECT_FALSE(listener_.seen(key("s.y").key));
}

TEST_F(ReleaseNotifyTest, NoNotifyWhenNobodyWaits) {
  RawListener raw;
  const StoreKey k = key("quiet");
  ASSERT_TRUE(acquireAs(*other_, k, "H", "t1").acquired);
  ASSERT_TRUE(other_->release(k, "t1", dlm::LockMode::EXCLUSIVE));
  // An expired request row does not count as a waiter either.
  ASSERT_TRUE(acquireAs(*other_, k, "H", "t2").acquired);
  ASSERT_EQ(waitAs(*other_, k, "W", 1ms).deadlockCycle, Keys{});
  const StoreTime expired = other_->now() + 1ms;
  ASSERT_TRUE(eventually([&] { return other_->now() > expired; }));
  ASSERT_TRUE(other_->release(k, "t2", dlm::LockMode::EXCLUSIVE));
  // A retried release frees nothing and announces nothing.
  ASSERT_TRUE(acquireAs(*other_, k, "H", "t3").acquired);
  ASSERT_EQ(waitAs(*other_, k, "W").deadlockCycle, Keys{});
  ASSERT_TRUE(other_->release(k, "t3", dlm::LockMode::EXCLUSIVE));
  ASSERT_TRUE(other_->release(k, "t3", dlm::LockMode::EXCLUSIVE));
  const std::string marker = releaseMarker(*other_, scope_);
  // Only the release with a live waiter was announced, once.
  EXPECT_EQ(raw.until(marker), Keys{k.key});
}

TEST_F(ReleaseNotifyTest, ForceReleaseWakesWaitersToo) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  const StoreKey k = key("forced.child");
  ASSERT_TRUE(acquireAs(*other_, k, "H", "th").acquired);
  ASSERT_EQ(waitAs(*other_, key("forced"), "W").deadlockCycle, Keys{});
  ASSERT_TRUE(stores_.newAdminStore()->forceRelease(k.key));
  EXPECT_TRUE(listener_.waitFor(k.key));
}

TEST_F(ReleaseNotifyTest,
       ReleaseWithinIsAnnouncedAtCommitOnlyAndNotOnRollback) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  pqxx::connection app(stores_.conninfo());
  const StoreKey k = key("orders.o1");
  ASSERT_TRUE(acquireAs(*other_, k, "H", "t1").acquired);
  ASSERT_EQ(waitAs(*other_, k, "W").deadlockCycle, Keys{});
  {
    pqxx::work tx(app);
    commitLockTx(*other_, tx, k, "t1");
    // Not before the commit: a later release's announcement arrives while
    // this one's has not.
    EXPECT_TRUE(listener_.waitFor(releaseMarker(*other_, scope_)));
    EXPECT_FALSE(listener_.seen(k.key));
    tx.abort();
  }
  // Not after a rollback either.
  EXPECT_TRUE(listener_.waitFor(releaseMarker(*other_, scope_)));
  EXPECT_FALSE(listener_.seen(k.key));
  EXPECT_TRUE(other_->describe(k.key)->held);
  {
    pqxx::work tx(app);
    commitLockTx(*other_, tx, k, "t1");
    tx.commit();
  }
  EXPECT_TRUE(listener_.waitFor(k.key));
}

TEST_F(ReleaseNotifyTest, OneListeningConnectionServesEveryListener) {
  RecordingListener second;
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  ASSERT_TRUE(store_->subscribeReleases(&second));
  EXPECT_EQ(listeningBackends().size(), 1u);
  const StoreKey k = key("shared");
  releaseWithWaiter(k);
  EXPECT_TRUE(listener_.waitFor(k.key));
  EXPECT_TRUE(second.waitFor(k.key));
  store_->unsubscribeReleases(&second);
  // The other listener keeps the connection.
  EXPECT_EQ(listeningBackends().size(), 1u);
  const StoreKey k2 = key("shared2");
  releaseWithWaiter(k2);
  EXPECT_TRUE(listener_.waitFor(k2.key));
  EXPECT_FALSE(second.seen(k2.key));
}

// Threads of this process (Linux).
int threadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

TEST_F(ReleaseNotifyTest, LastUnsubscribeStopsTheThreadAndClosesTheConnection) {
  const int threads = threadCount();
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  EXPECT_EQ(threadCount(), threads + 1);
  EXPECT_EQ(listeningBackends().size(), 1u);
  store_->unsubscribeReleases(&listener_);
  EXPECT_EQ(threadCount(), threads);
  EXPECT_TRUE(eventually([&] { return listeningBackends().empty(); }));
  // Nothing is delivered after unsubscribe returned, although the server
  // announced the release.
  RawListener raw;
  const StoreKey k = key("after");
  releaseWithWaiter(k);
  EXPECT_EQ(raw.until(releaseMarker(*other_, scope_)), Keys{k.key});
  EXPECT_EQ(listener_.keys(), Keys{});
  // And subscribing again starts over.
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  const StoreKey k2 = key("again");
  releaseWithWaiter(k2);
  EXPECT_TRUE(listener_.waitFor(k2.key));
}

TEST_F(ReleaseNotifyTest, CloseStopsTheThreadAndLaterSubscribesFail) {
  const int threads = threadCount();
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  EXPECT_EQ(threadCount(), threads + 1);
  store_->close();
  EXPECT_EQ(threadCount(), threads);
  EXPECT_TRUE(eventually([&] { return listeningBackends().empty(); }));
  EXPECT_EQ(codeOf([&] { store_->subscribeReleases(&listener_); }),
            ErrorCode::INTERNAL_ERROR);
  store_->unsubscribeReleases(&listener_);  // harmless after close
}

// Blocks inside released() until told to go on.
class SlowListener final : public ReleaseListener {
 public:
  void released(std::string_view) override {
    inside_ = true;
    while (!go_) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);
    ++calls_;
    inside_ = false;
  }
  void missedReleases() override {}
  std::atomic<bool> inside_{false};
  std::atomic<bool> go_{false};
  std::atomic<int> calls_{0};
};

TEST_F(ReleaseNotifyTest, UnsubscribeWaitsForARunningCallback) {
  SlowListener slow;
  ASSERT_TRUE(store_->subscribeReleases(&slow));
  releaseWithWaiter(key("slow"));
  ASSERT_TRUE(eventually([&] { return slow.inside_.load(); }));
  std::thread unsubscriber([&] { store_->unsubscribeReleases(&slow); });
  slow.go_ = true;
  unsubscriber.join();
  // The callback had finished when unsubscribe returned.
  EXPECT_FALSE(slow.inside_);
  EXPECT_EQ(slow.calls_, 1);
}

TEST_F(ReleaseNotifyTest, KilledListeningBackendIsReplacedAndMissedReported) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  const auto before = listeningBackends();
  ASSERT_EQ(before.size(), 1u);
  execSql(stores_.admin(),
          fmt::format("SELECT pg_terminate_backend({})", before[0]));
  EXPECT_TRUE(listener_.waitForMissed(1));
  std::vector<int> after;
  // A new backend LISTENs (the terminated one may linger in the view).
  EXPECT_TRUE(eventually([&] {
    after = listeningBackends();
    return after.size() == 1 && after[0] != before[0];
  })) << ::testing::PrintToString(after);
  const StoreKey k = key("after.kill");
  releaseWithWaiter(k);
  EXPECT_TRUE(listener_.waitFor(k.key));
}

// Connections for a bare ReleaseChannel, as the store opens them.
internal::ReleaseChannel::Connect connectTo(const std::string& conninfo) {
  return
      [params = internal::ConnParams::parse(conninfo)](Deadline d, int wakeFd) {
        return internal::PgConn::open(params, d, wakeFd);
      };
}

TEST(ReleaseChannel, SubscribeIsFalseWhenNoServerAnswers) {
  // Port 1 on loopback: nothing listens there.
  internal::ReleaseChannel channel(connectTo("host=127.0.0.1 port=1"), 2s);
  RecordingListener listener;
  EXPECT_FALSE(channel.subscribe(&listener));
  EXPECT_FALSE(channel.running());
  channel.unsubscribe(&listener);  // harmless
}

TEST(ReleaseChannel, RunsOnlyWhileSomeoneListens) {
  internal::ReleaseChannel channel(connectTo(""), 5s);
  RecordingListener a, b;
  EXPECT_FALSE(channel.running());
  ASSERT_TRUE(channel.subscribe(&a));
  ASSERT_TRUE(channel.subscribe(&b));
  EXPECT_TRUE(channel.running());
  channel.unsubscribe(&a);
  EXPECT_TRUE(channel.running());
  channel.unsubscribe(&b);
  EXPECT_FALSE(channel.running());
  ASSERT_TRUE(channel.subscribe(&a));
  channel.close();
  EXPECT_FALSE(channel.running());
}

}  // namespace
}  // namespace dlm::test
