// A LockGuard's keep-alive behind a stalled server: its renewals hang, so
// the lease must be judged lost locally. onLost has to fire before the lease
// expires by the store's clock (after that another holder may take the
// lock while the guarded work still runs), and the guard's accessors must
// answer at once, not wait for the hung renewal.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/hold_log.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"
#include "faults/bounded_call.h"
#include "faults/proxied_server.h"
#include "faults/server_control.h"
#include "support/test_stores.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

constexpr auto kTtl = 3000ms;
constexpr auto kOperationTimeout = 1000ms;
constexpr double kAccessorBoundMs = 50;

// The store clock minus the steady clock, in ns: read both around one
// clock_timestamp() on a direct connection (the midpoint is within half a
// round trip of the truth, well under a millisecond on loopback).
std::int64_t storeMinusSteadyNs(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  const std::int64_t before = cli::steadyNowNs();
  const auto r = tx.exec(
      "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  const std::int64_t after = cli::steadyNowNs();
  return r[0][0].as<std::int64_t>() * 1000 - (before + after) / 2;
}

std::int64_t storeNs(StoreTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

TEST(KeepAliveUnderStall, OnLostFiresBeforeTheLeaseExpiresAndAccessorsAnswerAtOnce) {
  ASSERT_FALSE(clusterDir().empty())
      << "DLM_TEST_PG_DIR must name the throwaway cluster (scripts/test.sh)";
  auto env = makePostgresEnvironment();
  auto proxy = proxyToServer();
  LockConfiguration config;
  config.lockTtl = kTtl;
  config.operationTimeout = kOperationTimeout;
  config.storeRetries = 3;
  config.storeRetryBackoff = 20ms;
  auto manager = DistributedLockManager::builder()
                     .clientId("faults")
                     .farmId("farm1")
                     .store(openStore(proxiedUrl(*env, *proxy),
                                      env->postgresSchema()))
                     .configuration(config)
                     .build();
  manager->initialize();
  auto direct = connectWithin(5s);
  const std::int64_t offsetNs = storeMinusSteadyNs(*direct);

  Lock lock = manager->getLockInstance("kept", LockLevel::DC);
  manager->acquireLock(lock, kTtl, 0ms);
  const StoreTime firstExpiry = lock.expiresAt();
  std::atomic<std::int64_t> lostAtNs{0};
  std::atomic<int> lostCode{-1};
  KeepAliveOptions keepAlive;
  keepAlive.onLost = [&](const DLMException& why) {
    lostAtNs = cli::steadyNowNs();
    lostCode = static_cast<int>(why.code());
  };
  auto unblock = [&] {
    proxy->resume();
    proxy->cutAll();
  };
  {
    LockGuard guard(*manager, std::move(lock), keepAlive);
    // Let renewals run normally for a while (one every TTL / 3).
    std::this_thread::sleep_for(1500ms);
    proxy->stall();
    const std::int64_t stallNs = cli::steadyNowNs();

    // Poll the accessors while the renewals hang, timing each; the largest
    // expiry the guard reports is the last one a renewal confirmed.
    StoreTime lastConfirmed = firstExpiry;
    double accessorMaxMs = 0;
    bool unblocked = false;
    const auto giveUpAt = std::chrono::steady_clock::now() + kTtl + 3s;
    while (std::chrono::steady_clock::now() < giveUpAt && !unblocked) {
      for (int which = 0; which < 3 && !unblocked; ++which) {
        const auto got = boundedCall(
            [&] {
              if (which == 0) (void)guard.lost();
              if (which == 1) (void)guard.holdsLock();
              if (which == 2) lastConfirmed = std::max(lastConfirmed, guard.expiresAt());
            },
            2s, unblock);
        accessorMaxMs = std::max(accessorMaxMs, got.ms);
        unblocked = got.unblocked;
      }
      if (lostAtNs != 0 &&
          cli::steadyNowNs() - lostAtNs > 200'000'000LL) {
        break;  // seen the accessors after onLost too
      }
      std::this_thread::sleep_for(20ms);
    }
    proxy->resume();

    const std::int64_t expiryStoreNs = storeNs(lastConfirmed);
    const std::int64_t expirySteadyNs = expiryStoreNs - offsetNs;
    const double expiryAfterStallMs =
        static_cast<double>(expirySteadyNs - stallNs) / 1e6;
    const std::int64_t lost = lostAtNs;
    std::string firing = "did not fire";
    double marginMs = 0;
    if (lost != 0) {
      marginMs = static_cast<double>(expiryStoreNs - (lost + offsetNs)) / 1e6;
      firing = fmt::format(
          "fired {:.0f} ms after the stall, {:.0f} ms before the lease's "
          "expiry by the store clock (must be > 0), code {}",
          static_cast<double>(lost - stallNs) / 1e6, marginMs,
          toString(static_cast<ErrorCode>(lostCode.load())));
    }
    std::printf(
        "[ faults ] keep-alive under a stalled server (TTL 3 s): lease "
        "expires %.0f ms after the stall; onLost %s; accessors max %.1f ms "
        "(bound %.0f ms)%s\n",
        expiryAfterStallMs, firing.c_str(), accessorMaxMs, kAccessorBoundMs,
        unblocked ? ", an accessor hung until the test cut the connection"
                  : "");
    EXPECT_NE(lost, 0) << "onLost never fired within "
                       << (kTtl + 3s).count() << " ms of the stall";
    if (lost != 0) {
      EXPECT_GT(marginMs, 0) << "onLost fired after the lease had expired";
    }
    EXPECT_LE(accessorMaxMs, kAccessorBoundMs);
    EXPECT_FALSE(unblocked);
  }
}

}  // namespace
}  // namespace dlm::test::faults
