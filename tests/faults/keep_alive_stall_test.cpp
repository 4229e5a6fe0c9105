// A LockGuard's keep-alive behind a stalled server: its renewals hang, so
// the lease must be judged lost locally. onLost has to fire before the lease
// expires by the store's clock (after that another holder may take the
// lock while the guarded work still runs), and the guard's accessors must
// answer at once, not wait for the hung renewal.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

#include "hold_log.h"
#include "dlm/dlm.h"
#include "dlm/store_url.h"
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
  const std::int64_t before = oracle::steadyNowNs();
  const auto r = tx.exec(
      "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint");
  const std::int64_t after = oracle::steadyNowNs();
  return r[0][0].as<std::int64_t>() * 1000 - (before + after) / 2;
}

std::int64_t storeNs(StoreTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

struct ProbeFigures {
  std::int64_t calls = 0;
  double maxMs = 0;         // the longest accessor call, hung ones included
  StoreTime lastConfirmed;  // the latest expiry the guard reported
  std::string hung;         // ", expiresAt() hung ..." or ""
};

// Calls lost(), holdsLock() and expiresAt() in turn on its own thread, as
// guarded work checking its lock would, timing each. A hung accessor cannot
// hang the test: stop() reports it and unblocks it.
class AccessorProbe {
 public:
  AccessorProbe(const LockGuard& guard, StoreTime expiry) : guard_(guard) {
    figures_.lastConfirmed = expiry;
  }
  ~AccessorProbe() {
    if (thread_.joinable()) thread_.join();
  }
  void start() {
    thread_ = std::thread([this] { run(); });
  }
  ProbeFigures stop(const std::function<void()>& unblock) {
    stop_ = true;
    std::unique_lock<std::mutex> lock(mutex_);
    const auto inCallMs = [&] {
      return inCallSinceNs_ == 0
                 ? 0.0
                 : static_cast<double>(oracle::steadyNowNs() - inCallSinceNs_) /
                       1e6;
    };
    if (!done_.wait_for(lock, 1s, [&] { return finished_; })) {
      figures_.maxMs = std::max(figures_.maxMs, inCallMs());
      figures_.hung = fmt::format(
          ", {} hung for {:.0f} ms (until the test cut the connection)",
          inCall_, inCallMs());
      lock.unlock();
      unblock();
      lock.lock();
      if (!done_.wait_for(lock, 20s, [&] { return finished_; })) {
        std::fprintf(stderr, "FATAL: %s did not return\n", inCall_);
        std::fflush(nullptr);
        std::_Exit(1);
      }
    }
    return figures_;
  }

 private:
  void run() {
    static const char* const kNames[] = {"lost()", "holdsLock()",
                                         "expiresAt()"};
    for (int i = 0; !stop_; i = (i + 1) % 3) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        inCall_ = kNames[i];
        inCallSinceNs_ = oracle::steadyNowNs();
      }
      StoreTime expiry{};
      if (i == 0) (void)guard_.lost();
      if (i == 1) (void)guard_.holdsLock();
      if (i == 2) expiry = guard_.expiresAt();
      std::lock_guard<std::mutex> lock(mutex_);
      const double ms =
          static_cast<double>(oracle::steadyNowNs() - inCallSinceNs_) / 1e6;
      figures_.maxMs = std::max(figures_.maxMs, ms);
      ++figures_.calls;
      if (i == 2)
        figures_.lastConfirmed = std::max(figures_.lastConfirmed, expiry);
      inCallSinceNs_ = 0;
      if (i == 2) std::this_thread::sleep_for(5ms);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    done_.notify_all();
  }

  const LockGuard& guard_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  const char* inCall_ = "";
  std::int64_t inCallSinceNs_ = 0;
  ProbeFigures figures_;
  std::thread thread_;
};

TEST(KeepAliveUnderStall,
     OnLostFiresBeforeTheLeaseExpiresAndAccessorsAnswerAtOnce) {
  ASSERT_FALSE(clusterDir().empty())
      << "DLM_TEST_PG_DIR must name the throwaway cluster (scripts/test.sh)";
  auto env = makePostgresEnvironment();
  auto proxy = proxyToServer();
  LockConfiguration config;
  config.lockTtl = kTtl;
  config.operationTimeout = kOperationTimeout;
  config.storeRetries = 3;
  config.storeRetryBackoff = 20ms;
  auto manager =
      DistributedLockManager::builder()
          .clientId("faults")
          .farmId("farm1")
          .store(openStore(proxiedUrl(*env, *proxy), env->postgresSchema()))
          .configuration(config)
          .build();
  manager->initialize();
  auto direct = connectWithin(5s);
  const std::int64_t offsetNs = storeMinusSteadyNs(*direct);

  Lock lock = manager->getLockInstance("kept", LockLevel::DC);
  manager->acquireLock(lock, kTtl, 0ms);
  std::atomic<std::int64_t> lostAtNs{0};
  std::atomic<int> lostCode{-1};
  KeepAliveOptions keepAlive;
  keepAlive.onLost = [&](const DLMException& why) {
    lostAtNs = oracle::steadyNowNs();
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
    AccessorProbe probe(guard, guard.expiresAt());
    proxy->stall();
    const std::int64_t stallNs = oracle::steadyNowNs();
    probe.start();

    // Only the library may end the lease here: the test waits for onLost
    // (or gives up) before it lets any traffic through again.
    const auto giveUpAt = std::chrono::steady_clock::now() + kTtl + 3s;
    while (std::chrono::steady_clock::now() < giveUpAt && lostAtNs == 0) {
      std::this_thread::sleep_for(5ms);
    }
    // A little longer, to see the accessors answer after onLost as well.
    if (lostAtNs != 0) std::this_thread::sleep_for(200ms);
    // What the library did on its own, before the test unblocks anything.
    const std::int64_t lost = lostAtNs;
    const ProbeFigures accessors = probe.stop(unblock);
    proxy->resume();

    const std::int64_t expiryStoreNs = storeNs(accessors.lastConfirmed);
    const double expiryAfterStallMs =
        static_cast<double>(expiryStoreNs - offsetNs - stallNs) / 1e6;
    std::string firing = fmt::format(
        "did not fire within {} ms of the stall",
        std::chrono::duration_cast<std::chrono::milliseconds>(kTtl + 3s)
            .count());
    if (lost == 0 && lostAtNs != 0) {
      firing += fmt::format(
          " (it fired {:.0f} ms after the stall, once the "
          "test had cut the connection)",
          static_cast<double>(lostAtNs - stallNs) / 1e6);
    }
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
        "[ faults ] keep-alive under a stalled server (TTL 3 s): last "
        "confirmed expiry %.0f ms after the stall; onLost %s; accessors: %lld "
        "calls, max %.1f ms (bound %.0f ms)%s\n",
        expiryAfterStallMs, firing.c_str(),
        static_cast<long long>(accessors.calls), accessors.maxMs,
        kAccessorBoundMs, accessors.hung.c_str());
    EXPECT_NE(lost, 0) << "onLost never fired";
    if (lost != 0) {
      EXPECT_GT(marginMs, 0) << "onLost fired after the lease had expired";
    }
    EXPECT_LE(accessors.maxMs, kAccessorBoundMs) << accessors.hung;
  }
}

}  // namespace
}  // namespace dlm::test::faults
