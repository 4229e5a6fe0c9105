// A neighbour with nothing but dlm_client tries what the issue "Neighbours
// on one database" found it could do; each attack now fails, and each
// service keeps getting its locks. Bounds are behaviour (a wait that ends
// within its timeout), never speed.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "security/neighbour_fixture.h"
#include "support/error_code.h"
#include "support/joining_thread.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// Takes and frees `id` once: binds the manager's client to its login.
void useOnce(DistributedLockManager& m, const std::string& id) {
  Lock lock = m.getLockInstance(id, LockLevel::DC);
  m.tryAcquireLock(lock);
  ASSERT_TRUE(m.releaseLock(lock));
}

std::string registerWaitSql(const std::string& key, const std::string& owner,
                            long long maxWaitMs) {
  return fmt::format(
      "SELECT dlm_register_wait('{}', '{{}}', '{}.', '{}/', '{}', {}, false)",
      key, key, key, owner, maxWaitMs);
}

// --- forged queued requests
// ----------------------------------------------------

TEST_F(Neighbours, AForgedRequestOnAnotherServicesKeyIsRefused) {
  auto orders = managerAs(orders_.name(), "orders");
  useOnce(*orders, "orders");
  // Was: recorded, and the victim's `exec --wait 3` gave up after 3 s.
  EXPECT_EQ(
      stateOf(neighbour_.name(), registerWaitSql(keyOf("orders", "orders"),
                                                 "fake", 3153600000000LL)),
      "42501");
  Lock lock = orders->getLockInstance("orders", LockLevel::DC);
  EXPECT_NO_THROW(orders->acquireLock(lock, 30s, 3s));
  EXPECT_TRUE(lock.isAcquired());
}

TEST_F(Neighbours, ARequestStopsCountingWithinItsLeaseWhateverItAskedFor) {
  auto n = sqlAs(neighbour_.name());
  const std::string key = keyOf("junk", "k");
  execSql(*n, registerWaitSql(key, "forever", 3153600000000LL));
  const pqxx::result r = execSql(
      *n, "SELECT expires_at_ms - requested_at_ms FROM dlm_list_requests('" +
              key + "')");
  ASSERT_EQ(r.size(), 1U);
  EXPECT_LE(r[0][0].as<long long>(), kRequestLease.count());
  EXPECT_GT(r[0][0].as<long long>(), 0);
}

TEST_F(Neighbours, ADbaCancelsRequestsAndPurgeRemovesEndedOnes) {
  auto n = sqlAs(neighbour_.name());
  const std::string key = keyOf("junk", "k");
  execSql(*n, registerWaitSql(key, "w1", 60000));
  execSql(*n, registerWaitSql(key, "w2", 60000));
  // Only the admin role may cancel.
  EXPECT_EQ(stateOf(neighbour_.name(),
                    "SELECT dlm_cancel_requests('" + key + "', NULL)"),
            "42501");
  auto dba = sqlAs(dba_.name());
  EXPECT_EQ(
      execSql(*dba, "SELECT dlm_cancel_requests('" + key + "', NULL)")[0][0]
          .as<int>(),
      2);
  EXPECT_TRUE(
      execSql(*n, "SELECT 1 FROM dlm_list_requests('" + key + "')").empty());

  execSql(*n, registerWaitSql(key, "gone", 1));
  std::this_thread::sleep_for(20ms);
  EXPECT_GE(execSql(*dba, "SELECT rows FROM dlm_purge(0, 100, false)")[0][0]
                .as<long long>(),
            1);
  EXPECT_TRUE(
      execSql(schema_.admin(), "SELECT 1 FROM " +
                                   schema_.admin().quote_name(schema_.name()) +
                                   ".dlm_lock_requests")
          .empty());
}

// --- nothing a client can hold open blocks others
// --------------------------------

TEST_F(Neighbours, ANeighboursOpenTransactionDoesNotStopOtherServicesWaits) {
  auto n = sqlAs(neighbour_.name());
  pqxx::work open(*n);
  // Was: a table lock on dlm_lock_requests until this transaction ends.
  open.exec(registerWaitSql(keyOf("junk", "k"), "holder", 60000));

  auto first = managerAs(orders_.name(), "orders");
  auto second = managerAs(orders_.name(), "orders");
  Lock held = first->getLockInstance("job", LockLevel::DC);
  first->tryAcquireLock(held);
  std::atomic<bool> got{false};
  ErrorCode failed = ErrorCode::INTERNAL_ERROR;
  std::atomic<bool> threw{false};
  {
    JoiningThread waiter([&] {
      Lock wanted = second->getLockInstance("job", LockLevel::DC);
      try {
        second->acquireLock(wanted, 30s, 10s);
        got = wanted.isAcquired();
        second->releaseLock(wanted);
      } catch (const DLMException& e) {
        failed = e.code();
        threw = true;
      }
    });
    std::this_thread::sleep_for(500ms);  // the waiter registers its wait
    ASSERT_TRUE(first->releaseLock(held));
  }
  EXPECT_FALSE(threw) << toString(failed);
  EXPECT_TRUE(got);
  open.abort();
}

TEST_F(Neighbours, ANeighbourCannotRowLockAServicesKeysInAnOpenTransaction) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock lock = orders->getLockInstance("guarded", LockLevel::DC);
  orders->tryAcquireLock(lock, 3s);
  auto n = sqlAs(neighbour_.name());
  pqxx::work open(*n);
  // Was: granted the row locks, and the victim's extend and release failed
  // while this transaction slept.
  const std::string key = keyOf("orders", "guarded");
  EXPECT_EQ(
      sqlStateOf([&] {
        open.exec(fmt::format(
            "SELECT * FROM dlm_try_acquire(ARRAY['{0}'], ARRAY[0::bigint], "
            "'{0}.', '{0}/', 'x', 'x', 60000, 'h', 1, false)",
            key));
      }),
      "42501");
  EXPECT_NO_THROW(orders->extendLock(lock, 5s));
  EXPECT_TRUE(orders->releaseLock(lock));
}

TEST_F(Neighbours, ANeighboursGuardWithoutTheTokenHoldsOffNoTakeover) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock lock = orders->getLockInstance("guarded-write", LockLevel::DC);
  orders->tryAcquireLock(lock, 300ms);
  auto n = sqlAs(neighbour_.name());
  pqxx::work open(*n);
  const std::string key = keyOf("orders", "guarded-write");
  // The guard needs the holder's token: with any other it refuses and locks
  // nothing, though the neighbour's transaction stays open.
  EXPECT_EQ(sqlStateOf([&] {
              open.exec(fmt::format(
                  "SELECT dlm_guard_within('{}', 'guessed', false)", key));
            }),
            "DLM01");
  // The lease ends and another instance of the service takes the lock,
  // while the neighbour's transaction is still open.
  std::this_thread::sleep_for(400ms);
  auto other = managerAs(orders_.name(), "orders");
  Lock taker = other->getLockInstance("guarded-write", LockLevel::DC);
  EXPECT_NO_THROW(other->tryAcquireLock(taker));
  EXPECT_TRUE(taker.isAcquired());
  open.abort();
}

// --- owners cannot be forged
// -------------------------------------------------------

TEST_F(Neighbours, AnOwnerAsListedCannotActAsThatOwner) {
  // A second login of the orders service (same tenant) sees the waits and
  // holds: what it sees is a digest, useless to act with.
  const std::string group = newRole("orders_group", false);
  const std::string other = newRole("orders_other", true);
  execSql(schema_.admin(), fmt::format("GRANT dlm_client, {0} TO {1}; GRANT "
                                       "{0} TO {2}",
                                       group, other, orders_.name()));
  execSql(*sqlAs(dba_.name()),
          fmt::format("SELECT dlm_bind_client('orders', '{}')", group));

  auto victim = storeAs(orders_.name());
  const std::string secret = "victim-owner-secret";
  const StoreKey key = pathKey("DC#farm1#orders#", "queue");
  const StoreKey mine = pathKey("DC#farm1#orders#", "mine");
  ASSERT_TRUE(acquireAs(*victim, key, "holder", "th").acquired);
  ASSERT_TRUE(waitAs(*victim, key, secret).deadlockCycle.empty());

  auto attacker = sqlAs(other);
  const pqxx::result listed = execSql(
      *attacker, "SELECT owner_id FROM dlm_list_requests('" + key.key + "')");
  ASSERT_EQ(listed.size(), 1U);
  const std::string shown = listed[0][0].c_str();
  EXPECT_NE(shown, secret);
  EXPECT_EQ(shown, victim->listedOwner(secret));
  // Was: deleted the victim's queue place.
  EXPECT_FALSE(
      execSql(*attacker, fmt::format("SELECT dlm_unregister_wait('{}', "
                                     "'{}')",
                                     key.key, shown))[0][0]
          .as<bool>());
  EXPECT_EQ(execSql(*attacker, "SELECT count(*) FROM dlm_list_requests('" +
                                   key.key + "')")[0][0]
                .as<int>(),
            1);
  // Was: SHARED holds under the victim's owner made its EXCLUSIVE wait a
  // deadlock with itself (DEADLOCK_DETECTED at once).
  execSql(*attacker,
          fmt::format("SELECT * FROM dlm_try_acquire(ARRAY['{0}'], "
                      "ARRAY[0::bigint], '{0}.', '{0}/', '{1}', 'ts', 60000, "
                      "'h', 1, true)",
                      mine.key, shown));
  EXPECT_TRUE(waitAs(*victim, mine, secret).deadlockCycle.empty());
}

// --- the server decides the hierarchy
// ----------------------------------------------

TEST_F(Neighbours, AForgedAncestorListIsRefused) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock parent = orders->getLockInstance("orders", LockLevel::DC);
  orders->tryAcquireLock(parent);
  // Was: granted while "orders" was held (the ancestors came from the
  // caller's array). A login of the same service, to get past tenancy.
  const std::string key = keyOf("orders", "orders.1");
  EXPECT_EQ(stateOf(orders_.name(),
                    fmt::format("SELECT * FROM dlm_try_acquire(ARRAY['{0}'], "
                                "ARRAY[0::bigint], '{0}.', '{0}/', 'x', 't', "
                                "60000, 'h', 1, false)",
                                key)),
            "22023");
  Lock child = orders->getLockInstance("orders.1", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { orders->tryAcquireLock(child); }),
            ErrorCode::LOCK_UNAVAILABLE);
}

TEST_F(Neighbours, AnInstanceWithAnotherHierarchySettingIsRefused) {
  auto dotted = managerAs(orders_.name(), "orders");
  useOnce(*dotted, "a.b");  // records separator '.'
  auto flat = managerAs(orders_.name(), "orders", '.', false);
  auto slashed = managerAs(orders_.name(), "orders", '/', true);
  for (auto* m : {flat.get(), slashed.get()}) {
    Lock lock = m->getLockInstance("a.b", LockLevel::DC);
    try {
      m->tryAcquireLock(lock);
      ADD_FAILURE() << "acquired with another hierarchy setting";
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("separator \".\""),
                std::string::npos)
          << e.what();
    }
  }
  // A client first used without a hierarchy keeps that setting.
  auto billing = managerAs(billing_.name(), "billing", '.', false);
  useOnce(*billing, "x.y");
  useOnce(*billing, "x");
}

// --- tenancy
// ---------------------------------------------------------------------

TEST_F(Neighbours, AnUnboundClientIsBoundToTheFirstLoginThatUsesIt) {
  auto billing = managerAs(billing_.name(), "billing");
  useOnce(*billing, "invoice");
  const pqxx::result r = execSql(
      *sqlAs(neighbour_.name()),
      "SELECT role_name, first_use, bound_by, separator, hierarchy FROM "
      "dlm_list_clients() WHERE client_id = 'billing'");
  ASSERT_EQ(r.size(), 1U);
  EXPECT_EQ(r[0][0].as<std::string>(), billing_.name());
  EXPECT_TRUE(r[0][1].as<bool>());
  EXPECT_EQ(r[0][2].as<std::string>(), billing_.name());
  EXPECT_EQ(r[0][3].as<std::string>(), ".");
  EXPECT_TRUE(r[0][4].as<bool>());

  auto intruder = managerAs(neighbour_.name(), "billing");
  Lock lock = intruder->getLockInstance("invoice", LockLevel::DC);
  try {
    intruder->tryAcquireLock(lock);
    ADD_FAILURE() << "a neighbour acquired under another service's client";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::PERMISSION_DENIED);
    const std::string what = e.what();
    EXPECT_NE(what.find("\"billing\""), std::string::npos) << what;
    EXPECT_NE(what.find(billing_.name()), std::string::npos) << what;
  }
}

TEST_F(Neighbours, ADbaBindsAClientToAGroupRoleAndRebindsIt) {
  const std::string group = newRole("orders_group", false);
  const std::string second = newRole("orders_login", true);
  execSql(schema_.admin(),
          fmt::format("GRANT dlm_client TO {1}; GRANT {0} TO {1}, {2}", group,
                      second, orders_.name()));
  auto dba = sqlAs(dba_.name());
  // Only the admin role binds.
  EXPECT_EQ(stateOf(orders_.name(), fmt::format("SELECT dlm_bind_client("
                                                "'orders', '{}')",
                                                group)),
            "42501");
  execSql(*dba, fmt::format("SELECT dlm_bind_client('orders', '{}')", group));
  useOnce(*managerAs(orders_.name(), "orders"), "a");
  useOnce(*managerAs(second, "orders"), "b");
  auto intruder = managerAs(neighbour_.name(), "orders");
  Lock lock = intruder->getLockInstance("c", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { intruder->tryAcquireLock(lock); }),
            ErrorCode::PERMISSION_DENIED);

  // Rebound to the neighbour's login: the service is refused, the
  // neighbour is not.
  execSql(*dba, fmt::format("SELECT dlm_bind_client('orders', '{}')",
                            neighbour_.name()));
  useOnce(*intruder, "c");
  auto orders = managerAs(orders_.name(), "orders");
  Lock refused = orders->getLockInstance("d", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { orders->tryAcquireLock(refused); }),
            ErrorCode::PERMISSION_DENIED);
  // Unbound: the next login to use it has it.
  EXPECT_TRUE(
      execSql(*dba, "SELECT dlm_unbind_client('orders')")[0][0].as<bool>());
  useOnce(*orders, "d");
  EXPECT_EQ(execSql(*dba,
                    "SELECT role_name FROM dlm_list_clients() WHERE client_id "
                    "= 'orders'")[0][0]
                .as<std::string>(),
            orders_.name());
}

TEST_F(Neighbours, ListingsShowOnlyWhatTheLoginMaySee) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock lock = orders->getLockInstance("visible", LockLevel::DC);
  orders->tryAcquireLock(lock);
  const std::string count =
      "SELECT count(*) FROM dlm_holders('DC#farm1#orders#', false)";
  EXPECT_EQ(execSql(*sqlAs(neighbour_.name()), count)[0][0].as<int>(), 0);
  EXPECT_EQ(execSql(*sqlAs(orders_.name()), count)[0][0].as<int>(), 1);
  EXPECT_EQ(execSql(*sqlAs(dba_.name()), count)[0][0].as<int>(), 1);
  EXPECT_TRUE(
      execSql(*sqlAs(neighbour_.name()), "SELECT 1 FROM dlm_describe('" +
                                             keyOf("orders", "visible") + "')")
          .empty());
}

TEST_F(Neighbours,
       ANeighbourCannotReleaseExtendOrUnregisterUnderAServicesClient) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock lock = orders->getLockInstance("k", LockLevel::DC);
  orders->tryAcquireLock(lock);
  const std::string key = keyOf("orders", "k");
  for (const std::string& sql :
       {fmt::format("SELECT dlm_unregister_wait('{}', 'o')", key),
        fmt::format("SELECT dlm_wait_cycle('{}', 'o')", key)}) {
    EXPECT_EQ(stateOf(neighbour_.name(), sql), "42501") << sql;
  }
  // Release needs the acquisition's token, which nothing shows; extend is
  // refused to a login outside the client's role whatever the token (V17).
  auto n = sqlAs(neighbour_.name());
  EXPECT_FALSE(execSql(*n, fmt::format("SELECT dlm_release('{}', 'guess', "
                                       "'{{}}', NULL, NULL)",
                                       key))[0][0]
                   .as<bool>());
  EXPECT_EQ(stateOf(neighbour_.name(),
                    fmt::format("SELECT dlm_extend('{}', 'guess', 1000)", key)),
            "42501");
  EXPECT_TRUE(orders->describeLock(lock).has_value());
  EXPECT_TRUE(orders->releaseLock(lock));
}

// --- the functions themselves
// ------------------------------------------------------

TEST_F(Neighbours, EveryCallableFunctionHasAPinnedSearchPathAndHelpersNoGrant) {
  // A function that runs with the owner's rights resolves names only in
  // pg_catalog, the schema and pg_temp (last); the helpers left unpinned
  // (to be inlined) are SQL-language, not SECURITY DEFINER, and nobody but
  // the owner may call them. Every PL/pgSQL function also runs on generic
  // plans (schema 20: never planned afresh per call), and carries no other
  // setting.
  const pqxx::result r =
      execSql(schema_.admin(),
              "SELECT p.proname, p.prosecdef, "
              "(SELECT l.lanname FROM pg_language l WHERE l.oid = p.prolang), "
              "coalesce(array_to_string(p.proconfig, ','), ''), "
              "has_function_privilege('dlm_client', p.oid, 'EXECUTE'), "
              "has_function_privilege('dlm_admin', p.oid, 'EXECUTE'), "
              "has_function_privilege('public', p.oid, 'EXECUTE') "
              "FROM pg_proc p WHERE p.pronamespace = " +
                  schema_.admin().quote(schema_.name()) + "::regnamespace");
  ASSERT_GT(r.size(), 20U);
  const std::string pinned = "search_path=pg_catalog, " +
                             schema_.admin().quote_name(schema_.name()) +
                             ", pg_temp";
  const std::string pinnedBare =
      "search_path=pg_catalog, " + schema_.name() + ", pg_temp";
  for (const auto& row : r) {
    const std::string name = row[0].as<std::string>();
    const std::string config = row[3].as<std::string>();
    if (config.empty()) {
      EXPECT_EQ(row[2].as<std::string>(), "sql") << name << " is unpinned";
      EXPECT_FALSE(row[1].as<bool>()) << name;
      EXPECT_FALSE(row[4].as<bool>() || row[5].as<bool>() || row[6].as<bool>())
          << name << " is unpinned and callable";
    } else if (row[2].as<std::string>() == "plpgsql") {
      const std::string generic = ",plan_cache_mode=force_generic_plan";
      EXPECT_TRUE(config == pinned + generic || config == pinnedBare + generic)
          << name << ": " << config;
    } else {
      EXPECT_TRUE(config == pinned || config == pinnedBare)
          << name << ": " << config;
    }
  }
}

// --- the wait-for graph walk is bounded
// ------------------------------------------

// A chain of `length` owners in client "chain": owner i holds key i and
// waits for key i + 1; written straight into the tables (what a long run
// of waits would leave), owners as digests.
void writeChain(pqxx::connection& admin, const std::string& schema,
                int length) {
  const std::string s = admin.quote_name(schema);
  execSql(
      admin,
      fmt::format("INSERT INTO {0}.dlm_locks (resource, resource_crc, status, "
                  "owner_id, "
                  "token, fencing_token, acquired_at, ttl_ms, expires_at) "
                  "SELECT 'DC#farm1#chain#k' || i, 0, 'HELD', "
                  "{0}.dlm_owner_digest('o' || i), 't' || i, 1, now(), 600000, "
                  "now() + interval '10 min' FROM generate_series(0, {1}) i",
                  s, length));
  execSql(
      admin,
      fmt::format(
          "INSERT INTO {0}.dlm_lock_requests (resource, owner_id, "
          "requested_at, "
          "expires_at, mode) SELECT 'DC#farm1#chain#k' || (i + 1), "
          "{0}.dlm_owner_digest('o' || i), now(), now() + interval '10 min', "
          "'EXCLUSIVE' FROM generate_series(0, {1} - 1) i",
          s, length));
  // As autovacuum would soon after such a run: without statistics the
  // planner reads the requests table whole for each owner's step, and the
  // walk's time bound (about 100 ms, schema 13) ends it long before owner
  // 501.
  execSql(admin, fmt::format("ANALYZE {0}.dlm_locks; ANALYZE "
                             "{0}.dlm_lock_requests",
                             s));
}

TEST_F(Neighbours, TheWaitForGraphWalkStopsAfterAThousandOwners) {
  writeChain(schema_.admin(), schema_.name(), 1500);
  auto store = storeAs(orders_.name());
  const auto flat = [](const std::string& id) {
    return StoreKey{"DC#farm1#chain#" + id, {}, {}, {}};
  };
  // "me" holds key 500 and waits for key 0: a cycle of 501 owners, found.
  execSql(schema_.admin(),
          fmt::format("UPDATE {}.dlm_locks SET owner_id = {}.dlm_owner_digest"
                      "('me') WHERE resource = 'DC#farm1#chain#k500'",
                      schema_.admin().quote_name(schema_.name()),
                      schema_.admin().quote_name(schema_.name())));
  // The walk also stops after about 100 ms (schema 13); 501 owners take it
  // 15 to 50 ms on a busy test machine. So the cycle is looked for as a
  // waiting acquire looks for it: its renewal walks again.
  std::vector<std::string> found;
  for (int walk = 0; walk < 10 && found.empty(); ++walk) {
    found =
        store->registerWait(WaitRequest{flat("k0"), "me", 30s}).deadlockCycle;
  }
  EXPECT_EQ(found.size(), 501U);
  // "far" holds key 1400 and waits for key 0: a cycle of 1,401 owners,
  // past the walk's bound: not searched to its end, the wait is recorded.
  execSql(schema_.admin(),
          fmt::format("UPDATE {}.dlm_locks SET owner_id = {}.dlm_owner_digest"
                      "('far') WHERE resource = 'DC#farm1#chain#k1400'",
                      schema_.admin().quote_name(schema_.name()),
                      schema_.admin().quote_name(schema_.name())));
  EXPECT_TRUE(store->registerWait(WaitRequest{flat("k0"), "far", 30s})
                  .deadlockCycle.empty());
  EXPECT_EQ(adminOf(*store).listWaiters("DC#farm1#chain#k0").size(), 1U);
}

// A wait-for graph of `owners` owners in client "graph", each with
// `requestsEach` requests: owner i holds key i and waits for keys i + 1 ..
// i + requestsEach (modulo `owners`), with the descendant ranges the
// library sends. Written straight into the tables, owners as digests. No
// cycle runs through an owner outside it.
void writeGraph(pqxx::connection& admin, const std::string& schema, int owners,
                int requestsEach) {
  const std::string s = admin.quote_name(schema);
  execSql(admin,
          fmt::format(
              "INSERT INTO {0}.dlm_locks (resource, resource_crc, status, "
              "owner_id, token, fencing_token, acquired_at, ttl_ms, "
              "expires_at) SELECT 'DC#farm1#graph#k' || i, 0, 'HELD', "
              "{0}.dlm_owner_digest('o' || i), 't' || i, 1, now(), 600000, "
              "now() + interval '10 min' FROM generate_series(0, {1} - 1) i",
              s, owners));
  execSql(admin,
          fmt::format(
              "INSERT INTO {0}.dlm_lock_requests (resource, owner_id, "
              "requested_at, expires_at, desc_begin, desc_end, mode) "
              "SELECT k, {0}.dlm_owner_digest('o' || i), now(), "
              "now() + interval '10 min', k || '.', k || '/', 'EXCLUSIVE' "
              "FROM generate_series(0, {1} - 1) i, generate_series(1, {2}) j, "
              "LATERAL (SELECT 'DC#farm1#graph#k' || ((i + j) % {1}) AS k) x",
              s, owners, requestsEach));
  execSql(admin, fmt::format("ANALYZE {0}.dlm_locks; ANALYZE "
                             "{0}.dlm_lock_requests",
                             s));
}

TEST_F(Neighbours, AThousandOwnersWithThreeRequestsEachAreAnsweredInTime) {
  writeGraph(schema_.admin(), schema_.name(), 1000, 3);
  // Was (schema 12): the walk again in dlm_wait_cycle took 6 to 9 s on
  // this graph, so a waiting acquire failed with CONNECTION_ERROR at its
  // operationTimeout. The walk is bounded in time (about 100 ms): past
  // that, as past 1,000 owners, no cycle is reported and the wait goes on.
  LockConfiguration config;
  config.sleepBetweenRetries = 200ms;
  config.operationTimeout = 2s;
  auto m = DistributedLockManager::builder()
               .clientId("graph")
               .farmId("farm1")
               .store(storeAs(orders_.name()))
               .configuration(config)
               .build();
  m->initialize();
  Lock lock = m->getLockInstance("k0", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { m->acquireLock(lock, 30s, 1s); }),
            ErrorCode::LOCK_UNAVAILABLE);

  // The same through the store: answered within a budget the unbounded
  // walk overran, no cycle, the wait recorded beside the graph's three.
  PostgresStoreOptions options =
      schema_.options(fmt::format("user={}", orders_.name()));
  options.operationTimeout = 2s;
  auto store = std::make_shared<PostgresStore>(options);
  store->initialize(false);
  const StoreKey k0{
      "DC#farm1#graph#k0", {}, "DC#farm1#graph#k0.", "DC#farm1#graph#k0/"};
  EXPECT_TRUE(
      store->registerWait(WaitRequest{k0, "me", 30s}).deadlockCycle.empty());
  EXPECT_EQ(adminOf(*store).listWaiters(k0.key).size(), 4U);
}

}  // namespace
}  // namespace dlm::test
