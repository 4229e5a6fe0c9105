// The operator's calls for waiters and key namespaces: cancelRequests
// (exactly one key's request rows, all or one owner's as listed, waking the
// waiters they held back) and the client bindings (stores with roles bind;
// the others refuse with INVALID_ARGUMENT).
#include <algorithm>
#include <atomic>

#include "store_contract/store_contract_fixture.h"
#include "support/eventually.h"

namespace dlm::test {
namespace {

using std::chrono::seconds;
using CancelRequests = StoreContract;
using ClientBindings = StoreContract;

// Counts wake-ups of any kind from a store, unsubscribing when it ends.
class WakeCounter final : public ReleaseListener {
 public:
  explicit WakeCounter(std::shared_ptr<LockStore> store)
      : store_(std::move(store)) {}
  ~WakeCounter() override { store_->unsubscribeReleases(this); }
  bool subscribe() { return store_->subscribeReleases(this); }
  void released(std::string_view) override { ++wakes; }
  void missedReleases() override { ++wakes; }
  std::atomic<int> wakes{0};

 private:
  std::shared_ptr<LockStore> store_;
};

TEST_P(CancelRequests, RemovesEveryRequestOfExactlyTheKey) {
  EXPECT_EQ(wait("k", "W1"), Ids{});
  EXPECT_EQ(wait("k", "W2", seconds(30), LockMode::SHARED), Ids{});
  // A descendant, and a key that only starts like it: not the key.
  EXPECT_EQ(wait("k.child", "W3"), Ids{});
  EXPECT_EQ(wait("kx", "W4"), Ids{});
  EXPECT_EQ(cancelRequests(store(), key("k").key, std::nullopt), 2);
  EXPECT_EQ(waiting(), (Ids{"W3 waits k.child", "W4 waits kx"}));
  EXPECT_EQ(cancelRequests(store(), key("k").key, std::nullopt), 0);
  EXPECT_EQ(cancelRequests(store(), key("never").key, std::nullopt), 0);
}

TEST_P(CancelRequests, WithAnOwnerRemovesOnlyThatOwnersRequestAsListed) {
  EXPECT_EQ(wait("k", "W1"), Ids{});
  EXPECT_EQ(wait("k", "W2"), Ids{});
  EXPECT_EQ(wait("other", "W1"), Ids{});
  // The owner as the listing shows it (PostgreSQL: a digest).
  const std::string w1 = listedOwner("W1");
  const std::vector<WaitRecord> listed = listWaiters(store(), key("k").key);
  ASSERT_EQ(listed.size(), 2U);
  EXPECT_TRUE(listed[0].owner == w1 || listed[1].owner == w1);
  EXPECT_EQ(cancelRequests(store(), key("k").key, std::string("nobody")), 0);
  EXPECT_EQ(cancelRequests(store(), key("k").key, w1), 1);
  EXPECT_EQ(waiting(), (Ids{"W1 waits other", "W2 waits k"}));
  EXPECT_EQ(cancelRequests(store(), key("k").key, w1), 0);
}

TEST_P(CancelRequests, ACancelledRequestNoLongerHoldsNewerAcquirersBack) {
  // W1 waits for a free key (its holder just left): fair queueing serves it
  // before B.
  EXPECT_EQ(wait("q", "W1"), Ids{});
  const AcquireResult held = acquire("q", "B", "tb");
  EXPECT_FALSE(held.acquired);
  EXPECT_TRUE(held.queued);
  EXPECT_EQ(cancelRequests(store(), key("q").key, std::nullopt), 1);
  EXPECT_TRUE(acquire("q", "B", "tb").acquired);
}

TEST_P(CancelRequests, WakesTheKeysOtherWaiters) {
  EXPECT_EQ(wait("k", "W1"), Ids{});
  // W2 waits through another store object on the database, as its process
  // would (listening before it registers, as a waiting manager does).
  std::shared_ptr<LockStore> other = otherStore();
  WakeCounter counter(other);
  ASSERT_TRUE(counter.subscribe());
  EXPECT_TRUE(other->registerWait(WaitRequest{key("k"), "W2",
                                              std::chrono::seconds(30)})
                  .deadlockCycle.empty());
  ASSERT_EQ(cancelRequests(store(), key("k").key, listedOwner("W1")), 1);
  EXPECT_TRUE(eventually([&] { return counter.wakes.load() > 0; }));
}

TEST_P(ClientBindings, AStoreWithoutRolesRefusesThemAsInvalidArguments) {
  if (traits().clientBindings) GTEST_SKIP() << "this store binds clients";
  EXPECT_EQ(codeOf([&] { listClients(store()); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { bindClient(store(), "svc", "svc_role"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { unbindClient(store(), "svc"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { adminOf(store()).purgeClient("svc"); }),
            ErrorCode::INVALID_ARGUMENT);
}

TEST_P(ClientBindings, AnAdminBindsListsAndUnbindsAClient) {
  if (!traits().clientBindings) GTEST_SKIP() << "this store has no roles";
  // pg_monitor: a role every PostgreSQL cluster has, and no login of the
  // tests is a member of.
  const std::string client = "contract_bind_" + GetParam();
  bindClient(store(), client, "pg_monitor");
  const auto bindings = listClients(store());
  const auto it = std::find_if(
      bindings.begin(), bindings.end(),
      [&](const ClientBinding& b) { return b.clientId == client; });
  ASSERT_NE(it, bindings.end());
  EXPECT_EQ(it->role, "pg_monitor");
  EXPECT_FALSE(it->firstUse);
  EXPECT_FALSE(it->boundBy.empty());
  EXPECT_LE(it->boundAt, store().now());
  EXPECT_GT(it->boundAt, store().now() - std::chrono::minutes(10));
  EXPECT_FALSE(it->hierarchy.has_value());
  EXPECT_TRUE(
      std::is_sorted(bindings.begin(), bindings.end(),
                     [](const ClientBinding& a, const ClientBinding& b) {
                       return a.clientId < b.clientId;
                     }));
  EXPECT_TRUE(unbindClient(store(), client));
  EXPECT_FALSE(unbindClient(store(), client));
  for (const ClientBinding& b : listClients(store())) {
    EXPECT_NE(b.clientId, client);
  }
}

TEST_P(ClientBindings, BindingRefusesABadClientIdAndAMissingRole) {
  if (!traits().clientBindings) GTEST_SKIP() << "this store has no roles";
  EXPECT_EQ(codeOf([&] { bindClient(store(), "a#b", "pg_monitor"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { bindClient(store(), "", "pg_monitor"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] {
              bindClient(store(), "contract_norole", "no_such_role_dlm");
            }),
            ErrorCode::INVALID_ARGUMENT);
  for (const ClientBinding& b : listClients(store())) {
    EXPECT_NE(b.clientId, "contract_norole");
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, CancelRequests,
                         ::testing::ValuesIn(contractStores()),
                         contractParamName);
INSTANTIATE_TEST_SUITE_P(Stores, ClientBindings,
                         ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
