// PostgresStore's release notifications: NOTIFY dlm_release (hints, not
// keys) when a key somebody waits for is freed, one listening connection
// and thread per store (PgReleaseChannel), delivery to subscribed listeners
// of the keys this store's waiters wait for, reconnection. Every
// store runs as a dlm_client-only role. The wait-for graph is in
// tests/store_contract.
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
#include "postgres/pg_client_role_support.h"
#include "postgres/pg_conninfo.h"
#include "postgres/pg_release_channel.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

using Keys = std::vector<std::string>;

// ---------------------------------------------------------- notifications

class ReleaseNotifyTest : public ::testing::Test {
 protected:
  ReleaseNotifyTest()
      : scope_("XDC#" + uniqueName("n") + "#"),
        app_(uniqueName("dlm_listen")),
        store_(stores_.newStore("application_name=" + app_)),
        other_(stores_.newStore()) {}

  ~ReleaseNotifyTest() override { store_->unsubscribeReleases(&listener_); }

  StoreKey key(const std::string& id) { return pathKey(scope_, id); }

  // A waiter of this store waits for `k`, held by another owner, then it is
  // released through the other store object (as another process would).
  void releaseWithWaiter(const StoreKey& k, const std::string& waiter = "W") {
    ASSERT_TRUE(acquireAs(*other_, k, "H", "th").acquired);
    ASSERT_EQ(waitAs(*store_, k, waiter).deadlockCycle, Keys{});
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
  RawListener raw(stores_.schema().name());
  // Held first: a waiter's request would hold back a newer acquisition
  // (fair queueing).
  for (const char* id : {"a.b", "s.y"}) {
    ASSERT_TRUE(acquireAs(*other_, key(id), "H", "th").acquired);
  }
  // Waiters on a (ancestor of a.b), a.b.c (descendant) and s.x (sibling of
  // s.y).
  ASSERT_EQ(waitAs(*store_, key("a"), "W1").deadlockCycle, Keys{});
  ASSERT_EQ(waitAs(*store_, key("a.b.c"), "W2").deadlockCycle, Keys{});
  ASSERT_EQ(waitAs(*store_, key("s.x"), "W3").deadlockCycle, Keys{});
  ASSERT_TRUE(other_->release(key("a.b"), "th", dlm::LockMode::EXCLUSIVE));
  ASSERT_TRUE(other_->release(
      key("s.y"), "th", dlm::LockMode::EXCLUSIVE));  // only a sibling waits
  const std::string marker = releaseMarker(*store_, scope_);
  EXPECT_EQ(raw.until(marker), Keys{raw.payloadOf(key("a.b").key)});
  EXPECT_TRUE(listener_.waitFor(marker));
  // Delivered as the waited keys the release may unblock.
  EXPECT_TRUE(listener_.seen(key("a").key));
  EXPECT_TRUE(listener_.seen(key("a.b.c").key));
  EXPECT_FALSE(listener_.seen(key("s.x").key));
}

TEST_F(ReleaseNotifyTest, NoNotifyWhenNobodyWaits) {
  RawListener raw(stores_.schema().name());
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
  EXPECT_EQ(raw.until(marker), Keys{raw.payloadOf(k.key)});
}

TEST_F(ReleaseNotifyTest, ForceReleaseWakesWaitersToo) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  const StoreKey k = key("forced.child");
  ASSERT_TRUE(acquireAs(*other_, k, "H", "th").acquired);
  ASSERT_EQ(waitAs(*store_, key("forced"), "W").deadlockCycle, Keys{});
  ASSERT_TRUE(stores_.newAdminStore()->forceRelease(k.key));
  EXPECT_TRUE(listener_.waitFor(key("forced").key));
}

TEST_F(ReleaseNotifyTest,
       ReleaseWithinIsAnnouncedAtCommitOnlyAndNotOnRollback) {
  ASSERT_TRUE(store_->subscribeReleases(&listener_));
  pqxx::connection app(stores_.conninfo());
  const StoreKey k = key("orders.o1");
  ASSERT_TRUE(acquireAs(*other_, k, "H", "t1").acquired);
  ASSERT_EQ(waitAs(*store_, k, "W").deadlockCycle, Keys{});
  {
    pqxx::work tx(app);
    commitLockTx(*other_, tx, k, "t1");
    // Not before the commit: a later release's announcement arrives while
    // this one's has not.
    EXPECT_TRUE(listener_.waitFor(releaseMarker(*store_, scope_)));
    EXPECT_FALSE(listener_.seen(k.key));
    tx.abort();
  }
  // Not after a rollback either.
  EXPECT_TRUE(listener_.waitFor(releaseMarker(*store_, scope_)));
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
  RawListener raw(stores_.schema().name());
  const StoreKey k = key("after");
  releaseWithWaiter(k);
  EXPECT_EQ(raw.until(releaseMarker(*other_, scope_)),
            Keys{raw.payloadOf(k.key)});
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

// Connections for a bare PgReleaseChannel, as the store opens them.
internal::PgReleaseChannel::Connect connectTo(const std::string& conninfo) {
  return
      [params = internal::ConnParams::parse(conninfo)](Deadline d, int wakeFd) {
        return internal::PgConn::open(params, d, wakeFd);
      };
}

TEST(PgReleaseChannel, SubscribeIsFalseWhenNoServerAnswers) {
  // Port 1 on loopback: nothing listens there.
  internal::PgReleaseChannel channel(connectTo("host=127.0.0.1 port=1"), 2s);
  RecordingListener listener;
  EXPECT_FALSE(channel.subscribe(&listener));
  EXPECT_FALSE(channel.running());
  channel.unsubscribe(&listener);  // harmless
}

// A LISTEN connection that cannot be opened (a misspelt dlm_listen_host,
// say) turns wake-ups off: the store says so as a warning, with the cause.
TEST(PgReleaseChannel, AStoreThatCannotListenWarnsWhy) {
  class Warnings final : public StoreWarningListener {
   public:
    void storeWarning(std::string_view message) override {
      messages.emplace_back(message);
    }
    std::vector<std::string> messages;
  };
  PostgresStoreOptions options;
  options.listenConnection = "host=127.0.0.1 port=1";
  PostgresStore store(options);
  Warnings warnings;
  store.addWarningListener(&warnings);
  RecordingListener listener;
  EXPECT_FALSE(store.subscribeReleases(&listener));
  ASSERT_EQ(warnings.messages.size(), 1U);
  EXPECT_NE(warnings.messages[0].find("release notifications are off"),
            std::string::npos)
      << warnings.messages[0];
  EXPECT_NE(warnings.messages[0].find("dlm_listen_host"), std::string::npos)
      << warnings.messages[0];
  store.removeWarningListener(&warnings);
  store.close();
}

// A LISTEN host name that does not exist is a mistake, not an outage:
// initialize() refuses it, naming the setting, before any wait is lost.
TEST(PgReleaseChannel, AListenHostThatDoesNotResolveIsRefused) {
  PostgresStoreOptions options;
  options.listenConnection = "host=no-such-host.invalid port=5432";
  PostgresStore store(options);
  const DLMException e = errorOf([&] { store.initialize(false); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_NE(std::string(e.what()).find("dlm_listen_host"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("no-such-host.invalid"),
            std::string::npos)
      << e.what();
  // A socket directory and a name that resolves are not looked at further.
  EXPECT_NO_THROW(internal::requireResolvableHosts(
      "host=localhost,/run/postgresql,127.0.0.1 port=1,2,3", "listen"));
  EXPECT_NO_THROW(internal::requireResolvableHosts(
      "host=no-such-host.invalid hostaddr=127.0.0.1", "listen"));
}

TEST(PgReleaseChannel, RunsOnlyWhileSomeoneListens) {
  internal::PgReleaseChannel channel(connectTo(""), 5s);
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
