// The first use of a client id binds it to the login's role (schema 7). Two
// processes that start together both try to bind it; the second waits for
// the first's transaction. That wait is not a busy key: it must not be
// answered "held by someone else" after rowLockWait (schema 10). The call
// that binds says so (NOTICE DL001, schema 17): the store's warning
// listeners hear it once, a manager reports it as one STORE_WARNING event,
// nothing is printed, and no later call (nor a client bound before) warns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlm/lock_manager.h"
#include "postgres/pg_client_role_support.h"
#include "support/joining_thread.h"
#include "support/recorded_events.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

TEST(PgFirstUse, AnAcquireWaitsForAConcurrentFirstUseOfItsClient) {
  ClientStores stores;
  auto store = stores.newStore();
  // Another session binds the client and keeps its transaction open for
  // 400 ms: eight times the store's rowLockWait (50 ms).
  pqxx::connection& admin = stores.admin();
  pqxx::work binding(admin);
  binding.exec_params(
      "SELECT " + admin.quote_name(stores.schema().name()) +
          ".dlm_bind_client($1, $2)",
      "firstuse", stores.role());
  JoiningThread committer([&] {
    std::this_thread::sleep_for(400ms);
    binding.commit();
  });
  const auto start = steady_clock::now();
  const AcquireResult r =
      acquireAs(*store, pathKey("DC#f#firstuse#", "job"), "o", "t1");
  const auto took = steady_clock::now() - start;
  committer.join();
  EXPECT_TRUE(r.acquired) << "answered blocked by '" << r.blockedBy
                          << "' for a key nobody holds";
  EXPECT_GE(took, 300ms) << "it did not wait for the other first use";
}

bool says(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class HeardWarnings final : public StoreWarningListener {
 public:
  void storeWarning(std::string_view message) override {
    messages.emplace_back(message);
  }
  std::vector<std::string> messages;
};

// What the server says of `client` bound at first use by `role`.
std::string boundAtFirstUse(const std::string& client,
                            const std::string& role) {
  return "dlm: client \"" + client + "\" was bound at first use to role \"" +
         role + "\" (login " + role + ")";
}

std::unique_ptr<DistributedLockManager> managerOf(
    std::shared_ptr<LockStore> store, const std::string& client,
    std::shared_ptr<LockEventHandler> events) {
  auto m = DistributedLockManager::builder()
               .clientId(client)
               .farmId("f1")
               .store(std::move(store))
               .events(std::move(events))
               .build();
  m->initialize();
  return m;
}

TEST(PgFirstUse, TheAcquireThatBindsIsOneStoreWarningAndNoLaterCallIs) {
  ClientStores stores;
  auto store = std::make_shared<PostgresStore>(
      stores.schema().options(stores.conninfo()));
  auto events = std::make_shared<RecordedEvents>();
  auto m = managerOf(store, "billing", events);
  ::testing::internal::CaptureStderr();
  Lock first = m->getLockInstance("job.1", LockLevel::DC);
  m->tryAcquireLock(first);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  auto warnings = events->of(LockEventKind::STORE_WARNING);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0].clientId, "billing");
  EXPECT_TRUE(
      says(warnings[0].message, boundAtFirstUse("billing", stores.role())))
      << warnings[0].message;
  EXPECT_TRUE(says(warnings[0].message, "dlmctl clients bind"))
      << warnings[0].message;

  // Later calls under the bound client: this manager's, and another
  // process's of the same login.
  ASSERT_TRUE(m->releaseLock(first));
  Lock second = m->getLockInstance("job.2", LockLevel::DC);
  m->acquireLock(second);
  ASSERT_TRUE(m->releaseLock(second));
  auto otherEvents = std::make_shared<RecordedEvents>();
  auto other = managerOf(std::make_shared<PostgresStore>(
                             stores.schema().options(stores.conninfo())),
                         "billing", otherEvents);
  Lock third = other->getLockInstance("job.3", LockLevel::DC);
  other->tryAcquireLock(third);
  ASSERT_TRUE(other->releaseLock(third));
  EXPECT_EQ(events->count(LockEventKind::STORE_WARNING), 1U);
  EXPECT_EQ(otherEvents->count(LockEventKind::STORE_WARNING), 0U);
}

TEST(PgFirstUse, AClientBoundBeforeIsNoWarning) {
  ClientStores stores;
  // One bound by an admin, one by another process's first use.
  pqxx::connection& admin = stores.admin();
  execSql(admin, "SELECT " + admin.quote_name(stores.schema().name()) +
                     ".dlm_bind_client('payroll', " +
                     admin.quote(stores.role()) + ")");
  auto earlier = stores.newStore();
  ASSERT_TRUE(
      acquireAs(*earlier, pathKey("DC#f1#stock#", "x"), "o", "t1").acquired);
  auto store = std::make_shared<PostgresStore>(
      stores.schema().options(stores.conninfo()));
  for (const std::string client : {"payroll", "stock"}) {
    auto events = std::make_shared<RecordedEvents>();
    auto m = managerOf(store, client, events);
    Lock lock = m->getLockInstance("job", LockLevel::DC);
    m->tryAcquireLock(lock);
    ASSERT_TRUE(m->releaseLock(lock));
    EXPECT_EQ(events->count(LockEventKind::STORE_WARNING), 0U) << client;
  }
}

TEST(PgFirstUse, AWaitThatBindsWarnsTheStoresListenersOnce) {
  ClientStores stores;
  auto store = stores.newStore();
  HeardWarnings warnings;
  store->addWarningListener(&warnings);
  const StoreKey key = pathKey("DC#f1#queue#", "job");
  EXPECT_TRUE(waitAs(*store, key, "o").deadlockCycle.empty());
  store->unregisterWait(key.key, "o");
  EXPECT_TRUE(waitAs(*store, key, "o").deadlockCycle.empty());
  store->unregisterWait(key.key, "o");
  store->removeWarningListener(&warnings);
  ASSERT_EQ(warnings.messages.size(), 1U);
  EXPECT_TRUE(
      says(warnings.messages[0], boundAtFirstUse("queue", stores.role())))
      << warnings.messages[0];
}

// An event handler may call the manager (dlm/lock_events.h): the warning is
// reported after the binding call gave its connection back, so with a pool
// of one the handler's own acquire gets it.
TEST(PgFirstUse, AnEventHandlerMayAcquireWithTheOnlyPooledConnection) {
  ClientStores stores;
  PostgresStoreOptions options = stores.schema().options(stores.conninfo());
  options.poolSize = 1;
  options.poolWait = 200ms;
  auto store = std::make_shared<PostgresStore>(options);

  class AcquireOnWarning final : public LockEventHandler {
   public:
    void onEvent(const LockEvent& event) override {
      if (event.kind != LockEventKind::STORE_WARNING) return;
      Lock lock = manager->getLockInstance("from.handler", LockLevel::DC);
      manager->tryAcquireLock(lock);  // throws when no connection is free
      acquired = manager->releaseLock(lock);
    }
    DistributedLockManager* manager = nullptr;
    std::atomic<bool> acquired{false};
  };
  auto handler = std::make_shared<AcquireOnWarning>();
  auto m = managerOf(store, "pooled", handler);
  handler->manager = m.get();
  Lock lock = m->getLockInstance("job", LockLevel::DC);
  m->tryAcquireLock(lock);
  ASSERT_TRUE(m->releaseLock(lock));
  EXPECT_TRUE(handler->acquired);
}

}  // namespace
}  // namespace dlm::test
