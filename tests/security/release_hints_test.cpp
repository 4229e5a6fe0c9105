// Release notifications (schema 14 on) name no key. LISTEN needs no
// privilege: until schema 13 any login of the database, with no dlm role at
// all, collected every tenant's key names from the NOTIFY payloads as they
// were released. Now a payload is hints (keyed hashes), a waiter asks the
// server for the hints of its own keys, and a neighbour cannot ask for
// another tenant's.
#include <fmt/format.h>

#include <chrono>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "security/neighbour_fixture.h"
#include "dlm/lock_store_admin.h"
#include "support/eventually.h"
#include "support/joining_thread.h"

namespace dlm::test {
namespace {

using std::chrono_literals::operator""s;

// What a connection hears on the channel dlm_release.
class Eavesdropper final : public pqxx::notification_receiver {
 public:
  explicit Eavesdropper(pqxx::connection& c)
      : pqxx::notification_receiver(c, "dlm_release") {}
  void operator()(const std::string& payload, int) override {
    payloads.push_back(payload);
  }
  std::vector<std::string> payloads;
};

using ReleaseHints = Neighbours;

TEST_F(ReleaseHints, AListenerWithNoDlmRoleLearnsNoKeyName) {
  const std::string nobody = newRole("nobody", /*login=*/true);
  auto listening = sqlAs(nobody);
  Eavesdropper ear(*listening);
  execSql(*listening, "LISTEN dlm_release");

  auto holder = managerAs(orders_.name(), "orders");
  auto waiter = managerAs(orders_.name(), "orders");
  Lock held = holder->getLockInstance("payroll.q3-layoffs", LockLevel::DC);
  holder->tryAcquireLock(held, 60s);
  Lock wanted = waiter->getLockInstance("payroll.q3-layoffs", LockLevel::DC);
  JoiningThread waiting([&] { waiter->acquireLock(wanted, 60s, 60s); });
  // Released once the waiter's request is recorded: the release announces.
  LockStoreAdmin& admin = *waiter->store().admin();
  ASSERT_TRUE(eventually(
      [&] { return !admin.listWaiters(wanted.storeKey()).empty(); }, 30s));
  ASSERT_TRUE(holder->releaseLock(held));
  waiting.join();
  ASSERT_TRUE(wanted.isAcquired()) << "the waiter got the lock";
  waiter->releaseLock(wanted);

  const auto until = std::chrono::steady_clock::now() + 10s;
  while (ear.payloads.empty() && std::chrono::steady_clock::now() < until) {
    listening->await_notification(0, 100000);
  }
  ASSERT_FALSE(ear.payloads.empty()) << "the release was announced";
  for (const std::string& payload : ear.payloads) {
    EXPECT_EQ(payload.find("q3-layoffs"), std::string::npos) << payload;
    EXPECT_EQ(payload.find("payroll"), std::string::npos) << payload;
    EXPECT_EQ(payload.find("orders"), std::string::npos) << payload;
    EXPECT_EQ(payload.find('#'), std::string::npos) << payload;
  }
}

TEST_F(ReleaseHints, ANeighbourCannotAskForAnotherTenantsHintsNorReadTheSecret) {
  auto orders = managerAs(orders_.name(), "orders");
  Lock held = orders->getLockInstance("payroll", LockLevel::DC);
  orders->tryAcquireLock(held, 60s);
  const std::string key = keyOf("orders", "payroll.q3-layoffs");
  EXPECT_EQ(stateOf(orders_.name(),
                    fmt::format("SELECT dlm_release_hints('{}')", key)),
            "")
      << "the tenant asks for its own key's hints";
  EXPECT_EQ(stateOf(neighbour_.name(),
                    fmt::format("SELECT dlm_release_hints('{}')", key)),
            "42501");
  EXPECT_EQ(stateOf(neighbour_.name(), "SELECT dlm_release_hints('DC#farm1')"),
            "22023");
  EXPECT_EQ(stateOf(neighbour_.name(), "SELECT * FROM dlm_release_secret"),
            "42501");
  EXPECT_EQ(stateOf(neighbour_.name(),
                    fmt::format("SELECT dlm_release_payload('{}')", key)),
            "42501");
}

}  // namespace
}  // namespace dlm::test
