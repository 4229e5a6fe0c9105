// The remedy for a squatted clientId (schema 17 on): rebindClient to the
// service's role (dlmctl clients bind CLIENT ROLE --purge), one
// transaction. Until schema 16 a rebind left the squatter's year-long holds in
// place, kept the separator it had recorded (so the service's own acquires
// were refused), and the squatter could still extend its holds; and no
// listing said which login had made a hold.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "dlm/lock_key.h"
#include "security/neighbour_fixture.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

using SquatRebind = Neighbours;

// Every hold under `client` (DC keys of farm1, XDC keys) as `admin` lists it.
std::vector<LockRecord> holdsOf(LockStoreAdmin& admin,
                                const std::string& client) {
  std::vector<LockRecord> out = admin.listHeld("DC#farm1#" + client + "#");
  for (LockRecord& r : admin.listHeld("XDC#" + client + "#")) {
    out.push_back(std::move(r));
  }
  return out;
}

TEST_F(SquatRebind, PurgeAndBindGiveTheServiceItsClientAndShutTheSquatterOut) {
  // The neighbour uses `payments` first (first-use binding) with the
  // separator '/', and holds two of its keys for 365 days in the service's
  // name: an EXCLUSIVE DC hold and a SHARED XDC hold, with a forged host;
  // it also waits for one of them.
  const LockKeyScope squatted{"farm1", "payments", '/', true};
  const StoreKey ledger = lockStoreKey(LockLevel::DC, squatted, "ledger");
  const StoreKey audit = lockStoreKey(LockLevel::XDC, squatted, "audit");
  const Holder forged{"payments-prod-1", 4242};
  const std::chrono::milliseconds year = 24h * 365;
  const auto squatter = storeAs(neighbour_.name());
  ASSERT_TRUE(squatter
                  ->tryAcquire({ledger, "squatter", "squat-token-1", year,
                                forged, LockMode::EXCLUSIVE})
                  .acquired);
  ASSERT_TRUE(squatter
                  ->tryAcquire({audit, "squatter", "squat-token-2", year,
                                forged, LockMode::SHARED})
                  .acquired);
  ASSERT_TRUE(squatter
                  ->registerWait({audit, "squatter-waiter", 10s,
                                  LockMode::EXCLUSIVE})
                  .deadlockCycle.empty());
  auto service = managerAs(orders_.name(), "payments", '.');
  Lock ledgerLock = service->getLockInstance("ledger", LockLevel::DC);
  EXPECT_EQ(codeOf([&] { service->tryAcquireLock(ledgerLock, 60s); }),
            ErrorCode::PERMISSION_DENIED)
      << "the squatter owns the name until the admin acts";

  // The admin binds the name to the service, ending the squatter's rows.
  const auto admin = storeAs(dba_.name());
  const ClientPurge purged = admin->rebindClient("payments", orders_.name());
  EXPECT_EQ(purged.holds, 1);
  EXPECT_EQ(purged.sharedHolds, 1);
  EXPECT_EQ(purged.requests, 1);

  // (a) The service's first attempts, with its own separator '.', succeed:
  // no "recorded as using the hierarchy separator" refusal, no hold or
  // request of the squatter in the way (one attempt each, no waiting).
  try {
    service->tryAcquireLock(ledgerLock, 60s);
  } catch (const DLMException& e) {
    ADD_FAILURE() << "the service's acquire after the purge: " << e.what()
                  << " [" << toString(e.code()) << "]";
  }
  EXPECT_TRUE(ledgerLock.isAcquired());
  Lock auditLock = service->getLockInstance("audit", LockLevel::XDC);
  EXPECT_NO_THROW(service->tryAcquireLock(auditLock, 60s));
  EXPECT_TRUE(auditLock.isAcquired());
  bool recordedDot = false;
  for (const ClientBinding& b : admin->listClients()) {
    if (b.clientId != "payments") continue;
    EXPECT_EQ(b.role, orders_.name());
    EXPECT_FALSE(b.firstUse);
    recordedDot = b.separator == std::optional<char>('.');
  }
  EXPECT_TRUE(recordedDot) << "the service's separator was not recorded";

  // (b) The squatter can no longer extend what it held, EXCLUSIVE or SHARED.
  EXPECT_EQ(codeOf([&] {
              squatter->extend(ledger.key, "squat-token-1", year,
                               LockMode::EXCLUSIVE);
            }),
            ErrorCode::PERMISSION_DENIED);
  EXPECT_EQ(codeOf([&] {
              squatter->extend(audit.key, "squat-token-2", year,
                               LockMode::SHARED);
            }),
            ErrorCode::PERMISSION_DENIED);

  // (c) Its holds and its request are gone: the admin sees the service's
  // two holds only.
  const std::vector<LockRecord> holds = holdsOf(*admin, "payments");
  EXPECT_EQ(holds.size(), 2u);
  for (const LockRecord& r : holds) {
    EXPECT_NE(r.holder.host, forged.host) << r.key;
    EXPECT_NE(r.owner, squatter->listedOwner("squatter")) << r.key;
  }
  EXPECT_TRUE(admin->listWaiters("XDC#payments#").empty());

  // (d) The admin's listings name the login that made each hold; the
  // service's own (a non-admin) name none.
  for (const LockRecord& r : holds) {
    EXPECT_EQ(r.login, orders_.name()) << r.key;
  }
  const std::optional<LockRecord> row = admin->describe(ledger.key);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->login, orders_.name());
  const auto serviceStore = storeAs(orders_.name());
  const std::vector<LockRecord> seen = holdsOf(*serviceStore, "payments");
  EXPECT_EQ(seen.size(), 2u);
  for (const LockRecord& r : seen) EXPECT_EQ(r.login, "") << r.key;
  const std::optional<LockRecord> seenRow = serviceStore->describe(ledger.key);
  ASSERT_TRUE(seenRow.has_value());
  EXPECT_EQ(seenRow->login, "");

  // Again, as an admin unsure of a race would: the service's holds stay.
  const ClientPurge again = admin->rebindClient("payments", orders_.name());
  EXPECT_EQ(again.holds + again.sharedHolds + again.requests, 0);
  EXPECT_EQ(holdsOf(*admin, "payments").size(), 2u);

  EXPECT_TRUE(service->releaseLock(ledgerLock));
  EXPECT_TRUE(service->releaseLock(auditLock));
}

TEST_F(SquatRebind, PurgeClientEndsEverythingAndKeepsTheBinding) {
  auto service = managerAs(orders_.name(), "everything");
  Lock lock = service->getLockInstance("k", LockLevel::DC);
  service->tryAcquireLock(lock, 60s);
  const auto admin = storeAs(dba_.name());
  const ClientPurge purged = admin->purgeClient("everything");
  EXPECT_EQ(purged.holds, 1) << "a member's hold too";
  EXPECT_TRUE(holdsOf(*admin, "everything").empty());
  EXPECT_EQ(codeOf([&] { service->extendLock(lock, 60s); }),
            ErrorCode::LOCK_NOT_HELD)
      << "its lock was force-released";
  for (const ClientBinding& b : admin->listClients()) {
    if (b.clientId != "everything") continue;
    EXPECT_EQ(b.role, orders_.name()) << "the binding stays";
    EXPECT_FALSE(b.separator.has_value()) << "the separator is forgotten";
  }
}

TEST_F(SquatRebind, TheAdminSeesWhoseRequestIsWhose) {
  // A request's login, as a hold's: the admin's listing names it, the
  // waiter's own does not.
  const auto waiter = storeAs(orders_.name());
  const StoreKey key =
      lockStoreKey(LockLevel::DC, {"farm1", "requests", '.', true}, "k");
  ASSERT_TRUE(waiter->registerWait({key, "w", 10s, LockMode::EXCLUSIVE})
                  .deadlockCycle.empty());
  const std::vector<WaitRecord> asAdmin =
      storeAs(dba_.name())->listWaiters(key.key);
  ASSERT_EQ(asAdmin.size(), 1u);
  EXPECT_EQ(asAdmin.front().login, orders_.name());
  const std::vector<WaitRecord> asWaiter = waiter->listWaiters(key.key);
  ASSERT_EQ(asWaiter.size(), 1u);
  EXPECT_EQ(asWaiter.front().login, "");
}

TEST_F(SquatRebind, OnlyAnAdminMayPurgeAClient) {
  auto service = managerAs(orders_.name(), "kept");
  Lock lock = service->getLockInstance("k", LockLevel::DC);
  service->tryAcquireLock(lock, 60s);
  EXPECT_EQ(codeOf([&] { storeAs(neighbour_.name())->purgeClient("kept"); }),
            ErrorCode::PERMISSION_DENIED);
  EXPECT_EQ(codeOf([&] { storeAs(orders_.name())->purgeClient("kept"); }),
            ErrorCode::PERMISSION_DENIED)
      << "not even the client's own login";
  EXPECT_EQ(codeOf([&] { storeAs(dba_.name())->purgeClient("a#b"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] {
              storeAs(neighbour_.name())->rebindClient("kept", neighbour_.name());
            }),
            ErrorCode::PERMISSION_DENIED);
  EXPECT_EQ(codeOf([&] {
              storeAs(dba_.name())->rebindClient("kept", "no_such_role_here");
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_NO_THROW(service->extendLock(lock, 60s));
  EXPECT_TRUE(service->releaseLock(lock));
}

}  // namespace
}  // namespace dlm::test
