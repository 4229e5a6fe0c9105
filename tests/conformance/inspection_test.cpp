// What operators look at: the live request rows of waiters (listWaiters),
// the schema-version table (schemaState) and the holder's address.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/store_fixture.h"
#include "dlm/lock_store_admin.h"
#include "schema/migration.h"
#include "support/eventually.h"
#include "support/joining_thread.h"
#include "support/owners.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using Inspection = StoreConformance;

// The keys of `waiters`, in the order listed.
std::vector<std::string> keysOf(const std::vector<WaitRecord>& waiters) {
  std::vector<std::string> keys;
  for (const auto& w : waiters) keys.push_back(w.key);
  return keys;
}

// A flat key (no hierarchy) for calling a store directly.
StoreKey flatKey(const std::string& key) { return StoreKey{key, {}, {}, {}}; }

TEST_P(Inspection, ListWaitersShowsAWaitingAcquireUntilItsWaitEnds) {
  auto m = manager();
  auto store = env().newStore();
  Lock held = m->getLockInstance("busy", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  const std::string key = held.storeKey();
  // Another key under the same client: not waited for, not listed.
  Lock other = m->getLockInstance("other", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(other); });

  std::string waiterOwner;
  std::atomic<bool> started{false};
  std::atomic<bool> acquired{false};
  JoiningThread waiter([&] {
    waiterOwner = currentOwner();  // the thread's own GUID
    started = true;
    Lock wanted = m->getLockInstance("busy", LockLevel::DC);
    m->acquireLock(wanted, std::chrono::seconds(30), std::chrono::seconds(20));
    acquired = true;
    m->releaseLock(wanted);
  });
  std::vector<WaitRecord> waiters;
  ASSERT_TRUE(eventually([&] {
    waiters = adminOf(*store).listWaiters(key);
    return !waiters.empty();
  })) << "the waiting acquireLock's request row was never listed";
  ASSERT_TRUE(started.load());
  ASSERT_EQ(waiters.size(), 1U);
  EXPECT_EQ(waiters[0].key, key);
  EXPECT_EQ(waiters[0].owner, store->listedOwner(waiterOwner));
  EXPECT_NE(waiters[0].requestedAt, StoreTime{});
  EXPECT_LE(waiters[0].requestedAt, waiters[0].expiresAt);
  EXPECT_GT(waiters[0].expiresAt, store->now());
  // The whole client's prefix lists it too, and nothing for `other`.
  EXPECT_EQ(keysOf(adminOf(*store).listWaiters("DC#farm1#" + client() + "#")),
            std::vector<std::string>{key});
  EXPECT_FALSE(acquired.load());

  ASSERT_TRUE(m->releaseLock(held));
  waiter.join();
  EXPECT_TRUE(acquired.load());
  EXPECT_TRUE(adminOf(*store).listWaiters(key).empty())
      << "the request row outlived the wait";
  EXPECT_TRUE(m->releaseLock(other));
}

TEST_P(Inspection, ListWaitersForgetsAWaitThatTimedOut) {
  auto m = manager();
  auto store = env().newStore();
  Lock held = m->getLockInstance("stuck", LockLevel::DC);
  asOwner("holder", [&] { m->tryAcquireLock(held); });
  asOwner("waiter", [&] {
    Lock wanted = m->getLockInstance("stuck", LockLevel::DC);
    EXPECT_EQ(codeOf([&] {
                m->acquireLock(wanted, milliseconds(1000), milliseconds(200));
              }),
              ErrorCode::LOCK_UNAVAILABLE);
  });
  EXPECT_TRUE(adminOf(*store).listWaiters(held.storeKey()).empty());
  EXPECT_TRUE(m->releaseLock(held));
}

TEST_P(Inspection, ListWaitersMatchesPrefixesAsBytesInKeyThenAgeOrder) {
  auto store = env().newStore();
  // '%' and '_' are LIKE wildcards; here they must match only themselves.
  const std::string p = "XDC#" + client() + "#";
  const std::vector<std::string> keys = {p + "ab", p + "a%", p + "a_c",
                                         p + "b"};
  for (const auto& k : keys) {
    const StoreKey key = flatKey(k);
    ASSERT_TRUE(store->registerWait({key, "owner-z", std::chrono::seconds(30)})
                    .deadlockCycle.empty());
  }
  // A second, younger waiter for one key comes after the older one, whatever
  // the owners' names.
  std::this_thread::sleep_for(milliseconds(5));
  const StoreKey shared = flatKey(p + "ab");
  ASSERT_TRUE(store->registerWait({shared, "owner-a", std::chrono::seconds(30)})
                  .deadlockCycle.empty());
  // A request whose waiter's deadline passed no longer counts.
  const StoreKey gone = flatKey(p + "a-gone");
  ASSERT_TRUE(store->registerWait({gone, "owner-g", milliseconds(1)})
                  .deadlockCycle.empty());
  std::this_thread::sleep_for(milliseconds(20));

  EXPECT_EQ(keysOf(adminOf(*store).listWaiters(p + "a%")),
            std::vector<std::string>{p + "a%"});
  EXPECT_EQ(keysOf(adminOf(*store).listWaiters(p + "a_")),
            std::vector<std::string>{p + "a_c"});
  EXPECT_TRUE(adminOf(*store).listWaiters(p + "a%c").empty());
  EXPECT_TRUE(adminOf(*store).listWaiters(p + "c").empty());
  const auto underA = adminOf(*store).listWaiters(p + "a");
  EXPECT_EQ(keysOf(underA), (std::vector<std::string>{p + "a%", p + "a_c",
                                                      p + "ab", p + "ab"}));
  ASSERT_EQ(underA.size(), 4U);
  EXPECT_EQ(underA[2].owner, store->listedOwner("owner-z"));
  EXPECT_EQ(underA[3].owner, store->listedOwner("owner-a"));
  EXPECT_LE(underA[2].requestedAt, underA[3].requestedAt);
  EXPECT_EQ(adminOf(*store).listWaiters(p).size(), 5U);
  // No prefix: everything live in the database, ours included.
  const auto all = keysOf(adminOf(*store).listWaiters(""));
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end()));
  EXPECT_EQ(std::count(all.begin(), all.end(), p + "b"), 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), p + "a-gone"), 0);

  for (const auto& k : keys) store->unregisterWait(k, "owner-z");
  store->unregisterWait(shared.key, "owner-a");
  store->unregisterWait(gone.key, "owner-g");
  EXPECT_TRUE(adminOf(*store).listWaiters(p).empty());
}

TEST_P(Inspection, SchemaStateListsEveryAppliedMigrationInOrder) {
  auto store = env().newStore();
  const SchemaState state = adminOf(*store).schemaState();
  const auto& migrations = env().name() == "postgres"
                               ? internal::postgresMigrations()
                               : internal::sqliteMigrations();
  ASSERT_TRUE(state.present);
  ASSERT_EQ(state.applied.size(), migrations.size());
  EXPECT_EQ(state.version(), internal::latestVersion(migrations));
  const std::regex utcIso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (std::size_t i = 0; i < migrations.size(); ++i) {
    const AppliedMigration& m = state.applied[i];
    EXPECT_EQ(m.version, static_cast<int>(i) + 1);
    EXPECT_EQ(m.version, migrations[i].version);
    // The description the migration file itself records.
    EXPECT_FALSE(m.description.empty());
    EXPECT_NE(migrations[i].sql.find("'" + m.description + "'"),
              std::string_view::npos)
        << m.description << " is not what " << migrations[i].file << " records";
    EXPECT_TRUE(std::regex_match(m.appliedAt, utcIso)) << m.appliedAt;
  }
}

TEST_P(Inspection, SchemaStateOfADatabaseWithoutTheSchemaIsNotPresent) {
  // Not initialized: schemaState needs no initialize() and changes nothing.
  auto store = env().newEmptyStore();
  SchemaState state = adminOf(*store).schemaState();
  EXPECT_FALSE(state.present);
  EXPECT_TRUE(state.applied.empty());
  EXPECT_EQ(state.version(), 0);
  state = adminOf(*store).schemaState();
  EXPECT_FALSE(state.present) << "the first look created the schema";
}

// What holderIp should be on PostgreSQL: the address the server sees, known
// from how libpq's PG* variables make the tests connect.
std::string expectedPostgresHolderIp(bool& known) {
  const char* hostaddr = std::getenv("PGHOSTADDR");
  const char* host = std::getenv("PGHOST");
  const std::string h = hostaddr && *hostaddr ? hostaddr : host ? host : "";
  known = true;
  // A unix socket (no host, or a directory): the server sees no address.
  if (h.empty() || h[0] == '/' || h[0] == '@') return "";
  if (h == "127.0.0.1" || h == "::1") return h;
  known = false;  // some TCP address: not empty, but not predictable here
  return "";
}

TEST_P(Inspection, HolderIpIsTheClientAddressOverTcpAndEmptyOnSqlite) {
  auto m = manager();
  Lock lock = m->getLockInstance("addressed", LockLevel::DC);
  m->tryAcquireLock(lock);
  const auto described = m->describeLock(lock);
  ASSERT_TRUE(described.has_value());
  const auto listed = adminOf(m->store()).listHeld(lock.storeKey());
  ASSERT_EQ(listed.size(), 1U);
  if (env().name() == "postgres") {
    bool known = false;
    const std::string expected = expectedPostgresHolderIp(known);
    if (known) {
      EXPECT_EQ(described->holderIp, expected);
    } else {
      EXPECT_FALSE(described->holderIp.empty());
    }
    // host(inet): no "/32" mask.
    EXPECT_EQ(described->holderIp.find('/'), std::string::npos);
  } else {
    EXPECT_EQ(described->holderIp, "");
  }
  EXPECT_EQ(listed[0].holderIp, described->holderIp);
  EXPECT_TRUE(m->releaseLock(lock));
}

INSTANTIATE_TEST_SUITE_P(Stores, Inspection,
                         ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
