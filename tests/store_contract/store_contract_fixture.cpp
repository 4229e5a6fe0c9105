#include "store_contract/store_contract_fixture.h"

#include <algorithm>
#include <map>
#include <thread>

#include "support/fake_store.h"
#include "dlm/lock_store_wrapper.h"
#include "support/test_keys.h"
#include "support/test_stores.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;

// The fake is in-memory: store objects "on one database" are handles on one
// FakeStore, whose clock follows real time.
class FakeDatabase final : public ContractDatabase {
 public:
  std::shared_ptr<LockStore> newStore() override {
    return std::make_shared<LockStoreWrapper>(fake_);
  }

 private:
  std::shared_ptr<FakeStore> fake_ =
      std::make_shared<FakeStore>(/*followRealTime=*/true);
};

// A store environment of tests/support (SQLite file, PostgreSQL schema,
// PostgreSQL through PgBouncer).
class EnvironmentDatabase final : public ContractDatabase {
 public:
  explicit EnvironmentDatabase(const std::string& name)
      : env_(makeEnvironment(name)) {}
  std::shared_ptr<LockStore> newStore() override { return env_->newStore(); }
  std::string postgresSchema() const override {
    return env_->postgresSchema();
  }
  // The login of "postgresql://ROLE@..." (the environments' URLs name it).
  std::string clientRole() const override {
    const std::string url = env_->url();
    const auto scheme = url.find("://");
    const auto at = url.find('@');
    if (scheme == std::string::npos || at == std::string::npos || at < scheme) {
      return "";
    }
    return url.substr(scheme + 3, at - scheme - 3);
  }

 private:
  std::unique_ptr<StoreEnvironment> env_;
};

// One shared database per store kind per test program.
std::map<std::string, std::unique_ptr<ContractDatabase>>& sharedDatabases() {
  static std::map<std::string, std::unique_ptr<ContractDatabase>> dbs;
  return dbs;
}

class DatabaseCleanup : public ::testing::Environment {
 public:
  void TearDown() override { sharedDatabases().clear(); }
};
const auto* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new DatabaseCleanup);

ContractDatabase& sharedDatabase(const std::string& name) {
  auto& slot = sharedDatabases()[name];
  if (!slot) slot = makeContractDatabase(name);
  return *slot;
}

const Holder kHolder{"contract-host", 4242};

}  // namespace

std::unique_ptr<ContractDatabase> makeContractDatabase(
    const std::string& name) {
  if (name == "fake") return std::make_unique<FakeDatabase>();
  return std::make_unique<EnvironmentDatabase>(name);
}

StoreTraits traitsOf(const std::string& name) {
  StoreTraits traits;
  if (name == "fake") {
    // One map entry per key, SHARED holds inside it; close() does nothing.
    traits.intentionRows = false;
    traits.sharedHoldRows = false;
    traits.closeRefusesCalls = false;
  }
  if (name == "postgres" || name == "pgbouncer") {
    traits.firstBlockerInKeyOrder = false;
    traits.clientBindings = true;
  }
  return traits;
}

std::vector<std::string> contractStores() {
  std::vector<std::string> names{"fake"};
  for (auto& n : conformanceStores()) names.push_back(n);
  return names;
}

// ---- inspection and admin calls

std::optional<LockRecord> describe(LockStore& store, const std::string& key) {
  return adminOf(store).describe(key);
}
std::vector<LockRecord> holdersOf(LockStore& store, const std::string& key) {
  return adminOf(store).holdersOf(key);
}
std::vector<LockRecord> listHeld(LockStore& store, const std::string& prefix) {
  return adminOf(store).listHeld(prefix);
}
std::vector<WaitRecord> listWaiters(LockStore& store,
                                    const std::string& prefix) {
  return adminOf(store).listWaiters(prefix);
}
PurgeBatch purge(LockStore& store, milliseconds idleFor, int batchSize,
                 bool dryRun) {
  return adminOf(store).purgeIdle(idleFor, batchSize, dryRun);
}
bool forceRelease(LockStore& store, const std::string& key) {
  return adminOf(store).forceRelease(key);
}
int cancelRequests(LockStore& store, const std::string& key,
                   const std::optional<std::string>& owner) {
  return adminOf(store).cancelRequests(
      key, owner ? std::optional<std::string_view>(*owner) : std::nullopt);
}
std::vector<ClientBinding> listClients(LockStore& store) {
  return adminOf(store).listClients();
}
void bindClient(LockStore& store, const std::string& clientId,
                const std::string& role) {
  adminOf(store).bindClient(clientId, role);
}
bool unbindClient(LockStore& store, const std::string& clientId) {
  return adminOf(store).unbindClient(clientId);
}

// ---- fixture

void StoreContract::TearDown() {
  store_.reset();
  own_.reset();
}

const StoreTraits& StoreContract::traits() const {
  static const std::map<std::string, StoreTraits> all = [] {
    std::map<std::string, StoreTraits> m;
    for (const auto& n : contractStores()) m[n] = traitsOf(n);
    return m;
  }();
  return all.at(GetParam());
}

LockStore& StoreContract::store() {
  if (!store_) store_ = otherStore();
  return *store_;
}

std::shared_ptr<LockStore> StoreContract::otherStore() {
  return database().newStore();
}

ContractDatabase& StoreContract::database() {
  if (own_) return *own_;
  return sharedDatabase(GetParam());
}

std::string StoreContract::postgresSchema() { return database().postgresSchema(); }

std::string StoreContract::clientRole() { return database().clientRole(); }

void StoreContract::freshDatabase() {
  ASSERT_EQ(store_, nullptr) << "freshDatabase() after store()";
  own_ = makeContractDatabase(GetParam());
}

std::string StoreContract::scope() const {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  // A key of the shape the manager builds (XDC#<client>#<id>): PostgreSQL
  // refuses any other (schema 12).
  return "XDC#" + name + "#";
}

StoreKey StoreContract::key(const std::string& id) const {
  return pathKey(scope(), id);
}

StoreKey StoreContract::flatKey(const std::string& id) const {
  StoreKey k;
  k.key = scope() + id;
  return k;
}

std::string StoreContract::owner(const std::string& name) const {
  return scope() + name;
}

std::string StoreContract::listedOwner(const std::string& name) {
  return store().listedOwner(owner(name));
}

StoreContract::Ids StoreContract::ids(
    const std::vector<std::string>& keys) const {
  Ids out;
  const std::string s = scope();
  for (const auto& k : keys) {
    out.push_back(k.rfind(s, 0) == 0 ? k.substr(s.size()) : "?" + k);
  }
  return out;
}

AcquireResult StoreContract::acquire(const std::string& id,
                                     const std::string& who,
                                     const std::string& token,
                                     milliseconds ttl, LockMode mode) {
  const StoreKey k = key(id);
  const std::string o = owner(who);
  const std::string t = owner(token);
  return store().tryAcquire(AcquireRequest{k, o, t, ttl, kHolder, mode});
}

bool StoreContract::release(const std::string& id, const std::string& token,
                            LockMode mode) {
  return store().release(key(id), owner(token), mode);
}

std::optional<StoreTime> StoreContract::extend(const std::string& id,
                                               const std::string& token,
                                               milliseconds ttl,
                                               LockMode mode) {
  return store().extend(key(id).key, owner(token), ttl, mode);
}

std::int64_t StoreContract::acquireAndRelease(const std::string& id) {
  static int serial = 0;
  const std::string token = "cycle-" + std::to_string(++serial);
  const AcquireResult r = acquire(id, "cycler", token, kShort);
  EXPECT_TRUE(r.acquired) << id << " blocked by " << r.blockedBy;
  EXPECT_TRUE(release(id, token));
  return r.fencingToken;
}

StoreContract::Ids StoreContract::wait(const std::string& id,
                                       const std::string& who,
                                       milliseconds maxWait, LockMode mode) {
  const StoreKey k = key(id);
  const std::string o = owner(who);
  waiterNames_[store().listedOwner(o)] = who;
  return ids(store().registerWait(WaitRequest{k, o, maxWait, mode})
                 .deadlockCycle);
}

void StoreContract::unregister(const std::string& id, const std::string& who) {
  store().unregisterWait(key(id).key, owner(who));
}

StoreContract::Ids StoreContract::waiting() {
  Ids out;
  const std::string s = scope();
  for (const auto& w : listWaiters(store(), s)) {
    const auto named = waiterNames_.find(w.owner);
    out.push_back((named != waiterNames_.end() ? named->second : "?" + w.owner) +
                  " waits " + w.key.substr(s.size()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

StoreContract::Ids StoreContract::heldIds() {
  std::vector<std::string> keys;
  for (const auto& r : listHeld(store(), scope())) keys.push_back(r.key);
  return ids(keys);
}

void StoreContract::waitPast(StoreTime until) {
  // Both clocks are whole milliseconds, floored: wait until strictly past.
  while (store().now() <= until) {
    std::this_thread::sleep_for(milliseconds(2));
  }
}

void StoreContract::letLeasesEnd(milliseconds ttl, milliseconds idle) {
  waitPast(store().now() + ttl + idle);
}

std::string contractParamName(
    const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace dlm::test
