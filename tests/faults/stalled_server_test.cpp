// A server that stops answering (a proxy that stops forwarding, sockets left
// open) must not hang the caller: tryAcquireLock, acquireLock and
// releaseLock each return within their bound with CONNECTION_ERROR. A row
// lock held by another session's open transaction makes tryAcquireLock
// answer LOCK_UNAVAILABLE after a short row-lock wait instead of blocking.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "dlm/dlm.h"
#include "dlm/store_url.h"
#include "faults/bounded_call.h"
#include "faults/proxied_server.h"
#include "faults/server_control.h"
#include "support/pg_test_support.h"
#include "support/test_stores.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

constexpr auto kOperationTimeout = 1000ms;
constexpr auto kAcquireTimeout = 2000ms;
constexpr auto kSlack = 1000ms;
// How long past its bound a hung call is left before the test unblocks it.
constexpr auto kExtraPatience = 4000ms;
constexpr double kRowLockBoundMs = 1000;

double ms(std::chrono::milliseconds d) {
  return static_cast<double>(d.count());
}

LockConfiguration boundedConfiguration() {
  LockConfiguration c;
  c.operationTimeout = kOperationTimeout;
  c.storeRetries = 3;
  c.storeRetryBackoff = 20ms;
  c.sleepBetweenRetries = 100ms;
  return c;
}

std::unique_ptr<DistributedLockManager> makeManager(
    std::shared_ptr<LockStore> store) {
  auto m = DistributedLockManager::builder()
               .clientId("faults")
               .farmId("farm1")
               .store(std::move(store))
               .configuration(boundedConfiguration())
               .build();
  m->initialize();
  return m;
}

std::string describe(const char* what, const BoundedOutcome& got,
                     double boundMs,
                     const char* unblockedBy = "the test cut the connection") {
  return fmt::format("{} {:.0f} ms (bound {:.0f} ms) -> {}{}", what, got.ms,
                     boundMs, got.outcome,
                     got.unblocked ? fmt::format(" only after {}", unblockedBy)
                                   : std::string());
}

TEST(StalledServer, EachCallReturnsWithinItsBoundWithConnectionError) {
  ASSERT_FALSE(clusterDir().empty())
      << "DLM_TEST_PG_DIR must name the throwaway cluster (scripts/test.sh)";
  auto env = makePostgresEnvironment();
  auto proxy = proxyToServer();
  auto manager =
      makeManager(openStore(proxiedUrl(*env, *proxy), env->postgresSchema()));

  // Connections exist and work before the stall; one lock is held for the
  // release under the stall.
  Lock held = manager->getLockInstance("stall.held", LockLevel::DC);
  manager->tryAcquireLock(held, 30s);
  Lock tried = manager->getLockInstance("stall.try", LockLevel::DC);
  Lock waited = manager->getLockInstance("stall.wait", LockLevel::DC);

  // A hung call is unblocked by letting traffic through and cutting the
  // connections: it then fails or succeeds at once, and its time shows
  // how long it would have hung.
  auto unblock = [&] {
    proxy->resume();
    proxy->cutAll();
  };
  const double tryBound = ms(kOperationTimeout + kSlack);
  const double acquireBound = ms(kAcquireTimeout + kOperationTimeout + kSlack);
  const double releaseBound = ms(kOperationTimeout + kSlack);

  proxy->stall();
  const auto tryGot =
      boundedCall([&] { manager->tryAcquireLock(tried, 30s); },
                  kOperationTimeout + kSlack + kExtraPatience, unblock);
  proxy->stall();
  const auto acquireGot = boundedCall(
      [&] { manager->acquireLock(waited, 30s, kAcquireTimeout); },
      kAcquireTimeout + kOperationTimeout + kSlack + kExtraPatience, unblock);
  proxy->stall();
  const auto releaseGot =
      boundedCall([&] { manager->releaseLock(held); },
                  kOperationTimeout + kSlack + kExtraPatience, unblock);
  proxy->resume();

  std::printf(
      "[ faults ] stalled server: %s; %s; %s\n",
      describe("tryAcquireLock", tryGot, tryBound).c_str(),
      describe("acquireLock(timeout 2 s)", acquireGot, acquireBound).c_str(),
      describe("releaseLock", releaseGot, releaseBound).c_str());
  EXPECT_LE(tryGot.ms, tryBound) << "tryAcquireLock";
  EXPECT_EQ(tryGot.outcome, "CONNECTION_ERROR") << tryGot.message;
  EXPECT_LE(acquireGot.ms, acquireBound) << "acquireLock";
  EXPECT_EQ(acquireGot.outcome, "CONNECTION_ERROR") << acquireGot.message;
  EXPECT_LE(releaseGot.ms, releaseBound) << "releaseLock";
  EXPECT_EQ(releaseGot.outcome, "CONNECTION_ERROR") << releaseGot.message;
}

TEST(StalledServer,
     ARowLockOfAnotherSessionMakesTryAcquireLockUnavailableAtOnce) {
  ASSERT_FALSE(clusterDir().empty())
      << "DLM_TEST_PG_DIR must name the throwaway cluster (scripts/test.sh)";
  auto env = makePostgresEnvironment();
  auto manager = makeManager(env->newStore());
  Lock lock = manager->getLockInstance("rowlocked", LockLevel::DC);
  // The row must exist to be locked: one acquisition creates it.
  manager->tryAcquireLock(lock, 30s);
  manager->releaseLock(lock);

  // Another session (an admin's, a long report's) holds the row lock.
  auto admin = connectWithin(5s);
  pqxx::work blocker(*admin);
  const auto locked = blocker.exec_params(
      "SELECT 1 FROM " + admin->quote_name(env->postgresSchema()) +
          ".dlm_locks WHERE resource = $1 FOR UPDATE",
      lock.storeKey());
  ASSERT_EQ(locked.size(), 1U) << "no row for " << lock.storeKey();

  const auto got = boundedCall(
      [&] { manager->tryAcquireLock(lock, 30s); }, 5s,
      // Ending the blocking transaction lets a blocked call through.
      [&] { blocker.abort(); });
  std::printf("[ faults ] row lock held by another session: %s\n",
              describe("tryAcquireLock", got, kRowLockBoundMs,
                       "the test rolled the blocking transaction back")
                  .c_str());
  if (!got.unblocked) blocker.abort();
  EXPECT_LE(got.ms, kRowLockBoundMs);
  EXPECT_EQ(got.outcome, "LOCK_UNAVAILABLE") << got.message;
  if (lock.isAcquired()) manager->releaseLock(lock);
}

}  // namespace
}  // namespace dlm::test::faults
