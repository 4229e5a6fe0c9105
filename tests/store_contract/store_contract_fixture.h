// The store contract suite's fixture: parameterised by store name ("fake",
// "sqlite", "postgres", "pgbouncer"), it calls LockStore methods directly (no
// manager). Each test gets its own key scope and owner names, so tests that
// share a database never see each other's keys or wait-for edges; tests that
// count or purge rows ask for a database of their own (freshDatabase()).
//
// Inspection and admin calls go through the free functions below (describe,
// holdersOf, listHeld, listWaiters, purge, forceRelease, cancelRequests and
// the client bindings), so a change in how a store reaches them is one edit
// here.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"
#include "support/error_code.h"

namespace dlm::test {

// What a store kind does differently where the contract leaves room (the row
// layout behind purge counts) or where the fake models less.
struct StoreTraits {
  // Acquiring a key leaves a never-acquired row for each missing ancestor
  // (an intention row), which a purge counts and deletes.
  bool intentionRows = true;
  // A stale SHARED hold is a row of its own that a purge counts and deletes
  // while other holds of its key live on.
  bool sharedHoldRows = true;
  // close() makes further calls throw.
  bool closeRefusesCalls = true;
  // Among descendants that block an acquisition, blockedBy names the first
  // in key order even when they are held in different modes. PostgreSQL
  // names an EXCLUSIVE holder before SHARED ones.
  bool firstBlockerInKeyOrder = true;
  // Binds clientIds to database roles (listClients, bindClient,
  // unbindClient); without roles those calls throw INVALID_ARGUMENT.
  bool clientBindings = false;
};

// Databases of one kind: each newStore() is another store object on the same
// database, as another process would have.
class ContractDatabase {
 public:
  virtual ~ContractDatabase() = default;
  virtual std::shared_ptr<LockStore> newStore() = 0;
  // PostgreSQL (and PgBouncer): the schema dlm lives in and the login role
  // the stores use; "" elsewhere.
  virtual std::string postgresSchema() const { return ""; }
  virtual std::string clientRole() const { return ""; }
};

// A database of store kind `name`, fresh and private.
std::unique_ptr<ContractDatabase> makeContractDatabase(const std::string& name);
StoreTraits traitsOf(const std::string& name);
// "fake" and every store compiled in, PgBouncer included.
std::vector<std::string> contractStores();

// ---- inspection and admin calls (one place to adapt)
std::optional<LockRecord> describe(LockStore& store, const std::string& key);
std::vector<LockRecord> holdersOf(LockStore& store, const std::string& key);
std::vector<LockRecord> listHeld(LockStore& store, const std::string& prefix);
std::vector<WaitRecord> listWaiters(LockStore& store,
                                    const std::string& prefix);
PurgeBatch purge(LockStore& store, std::chrono::milliseconds idleFor,
                 int batchSize, bool dryRun);
bool forceRelease(LockStore& store, const std::string& key);
int cancelRequests(LockStore& store, const std::string& key,
                   const std::optional<std::string>& owner);
std::vector<ClientBinding> listClients(LockStore& store);
void bindClient(LockStore& store, const std::string& clientId,
                const std::string& role);
bool unbindClient(LockStore& store, const std::string& clientId);

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  using Ids = std::vector<std::string>;

  void TearDown() override;

  const StoreTraits& traits() const;
  // The test's store (created on first use) and further store objects on
  // the same database.
  LockStore& store();
  std::shared_ptr<LockStore> otherStore();
  // From now on this test uses a database of its own (call before store()):
  // for purges and anything that counts rows of the whole database.
  void freshDatabase();
  // PostgreSQL (and PgBouncer): the schema of the test's database and the
  // login role its stores use (another session can lock rows there or end
  // that role's backends); "" on the other stores.
  std::string postgresSchema();
  std::string clientRole();

  // "<suite>_<test name>#": every key of the test starts with it.
  std::string scope() const;
  // The StoreKey of `id` under scope() ('.' separates path segments).
  StoreKey key(const std::string& id) const;
  // A key without hierarchy: no ancestors, no descendant range.
  StoreKey flatKey(const std::string& id) const;
  // An owner name unique to the test.
  std::string owner(const std::string& name) const;
  // owner(name) as the listings show it (LockStore::listedOwner).
  std::string listedOwner(const std::string& name);
  // Strips scope() from full keys.
  Ids ids(const std::vector<std::string>& keys) const;

  // One tryAcquire of `id` by owner(who) with `token` (unique to the test).
  AcquireResult acquire(const std::string& id, const std::string& who,
                        const std::string& token,
                        std::chrono::milliseconds ttl = std::chrono::seconds(30),
                        LockMode mode = LockMode::EXCLUSIVE);
  AcquireResult acquireShared(
      const std::string& id, const std::string& who, const std::string& token,
      std::chrono::milliseconds ttl = std::chrono::seconds(30)) {
    return acquire(id, who, token, ttl, LockMode::SHARED);
  }
  bool release(const std::string& id, const std::string& token,
               LockMode mode = LockMode::EXCLUSIVE);
  std::optional<StoreTime> extend(const std::string& id,
                                  const std::string& token,
                                  std::chrono::milliseconds ttl,
                                  LockMode mode = LockMode::EXCLUSIVE);
  // Acquires `id` with a short lease and releases it: the acquisition's
  // fencing token.
  std::int64_t acquireAndRelease(const std::string& id);
  // owner(who) registers a wait for `id`: the deadlock cycle, as ids.
  Ids wait(const std::string& id, const std::string& who,
           std::chrono::milliseconds maxWait = std::chrono::seconds(30),
           LockMode mode = LockMode::EXCLUSIVE);
  void unregister(const std::string& id, const std::string& who);
  // The live request rows of the test's keys as "<who> waits <id>", sorted.
  Ids waiting();
  // The keys (as ids) of listHeld over the test's scope, in listed order.
  Ids heldIds();

  // Sleeps until the store's clock is past `until`.
  void waitPast(StoreTime until);
  // Sleeps until every lease of `ttl` granted so far has ended and been
  // idle for `idle`.
  void letLeasesEnd(std::chrono::milliseconds ttl = kShort,
                    std::chrono::milliseconds idle = std::chrono::milliseconds(5));

  static ErrorCode codeOf(const std::function<void()>& fn) {
    return test::codeOf(fn);
  }

  // A lease that ends within the test, long enough to be live at the next
  // call even when other tests share the CPU.
  static constexpr std::chrono::milliseconds kShort{150};

 private:
  ContractDatabase& database();

  std::unique_ptr<ContractDatabase> own_;
  // Who registered a wait, by the owner the listings show (waiting()).
  std::map<std::string, std::string> waiterNames_;
  std::shared_ptr<LockStore> store_;
};

std::string contractParamName(const ::testing::TestParamInfo<std::string>& info);

}  // namespace dlm::test
