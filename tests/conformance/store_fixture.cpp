#include "conformance/store_fixture.h"

#include <atomic>
#include <thread>

namespace dlm::test {
namespace {

std::map<std::string, std::unique_ptr<StoreEnvironment>>& environments() {
  static std::map<std::string, std::unique_ptr<StoreEnvironment>> envs;
  return envs;
}

// Drops every environment (temp files, PostgreSQL schemas) at exit.
class EnvironmentCleanup : public ::testing::Environment {
 public:
  void TearDown() override { environments().clear(); }
};
const auto* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new EnvironmentCleanup);

}  // namespace

StoreEnvironment& StoreConformance::env() {
  auto& slot = environments()[GetParam()];
  if (!slot) slot = makeEnvironment(GetParam());
  return *slot;
}

std::unique_ptr<DistributedLockManager> StoreConformance::manager(
    const std::string& clientId, const std::string& farm,
    LockConfiguration config) {
  auto m = DistributedLockManager::builder()
               .clientId(clientId.empty() ? client() : clientId)
               .farmId(farm)
               .store(env().newStore())
               .configuration(config)
               .build();
  m->initialize();
  return m;
}

std::unique_ptr<DistributedLockManager> StoreConformance::observedManager(
    std::shared_ptr<LockEventHandler> events, LockConfiguration config) {
  auto m = DistributedLockManager::builder()
               .clientId(client())
               .farmId("farm1")
               .store(env().newStore())
               .configuration(config)
               .events(std::move(events))
               .build();
  m->initialize();
  return m;
}

std::string StoreConformance::client(const std::string& suffix) const {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  return name + suffix;
}

LockConfiguration StoreConformance::fastConfig() {
  LockConfiguration c;
  c.lockTtl = std::chrono::seconds(30);
  c.waitForLock = std::chrono::seconds(5);
  c.sleepBetweenRetries = std::chrono::milliseconds(20);
  // The suite judges behaviour, not speed: a call's budget that a busy
  // machine (a sanitizer build beside spinning processes) cannot use up.
  // The tests of time bounds set their own.
  c.operationTimeout = kTestStoreBudget;
  return c;
}

void waitForStoreTime(LockStore& store, StoreTime until) {
  // Both times are whole milliseconds, floored: the store's real expiry may
  // lie up to 1 ms after `until`, so wait until the clock is past it.
  while (store.now() <= until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string storeParamName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace dlm::test
