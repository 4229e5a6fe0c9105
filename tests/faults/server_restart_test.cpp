// A server restart (pg_ctl restart -m fast, and -m immediate: a crash) in
// the middle of a multi-process contention run: mutual exclusion and fencing
// hold, every error is CONNECTION_ERROR / RETRIES_EXHAUSTED, every call ends
// within its bound, acquisitions resume as soon as the call in flight at the
// restart has ended and the next one was made, and a waiter sleeping between
// attempts is woken by a release made after the restart.
//
// The runs last until the store has counted enough acquisitions before and
// after the restart (not a fixed time), and every time bound is the
// configured times plus the scheduling slack this machine shows during the
// test (support/scheduling_lag.h): a busy machine makes the test slower, not
// red.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "hold_log.h"
#include "dlm/dlm.h"
#include "faults/fault_run.h"
#include "faults/fault_scenario.h"
#include "faults/server_control.h"
#include "support/scheduling_lag.h"
#include "support/test_stores.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

constexpr auto kOperationTimeout = 2000ms;
// After the server accepts connections again: the call in flight ends within
// its bound (an acquire's: its timeout + operationTimeout) and the next call
// succeeds within its own (operationTimeout).
constexpr auto kMaxFirstAcquire =
    kWorkerAcquireTimeout + kOperationTimeout + kOperationTimeout;
// A release reaches a waiter through the server's NOTIFY, the store's
// listener and the manager's wait hub, then the waiter's attempt.
constexpr auto kMaxWakeUp = 2000ms;
// Enough acquisitions to prove something, before the restart and after it.
constexpr std::int64_t kAcquisitionsBefore = 50;
constexpr std::int64_t kAcquisitionsAfter = 100;
constexpr auto kEnoughWithin = 60s;

double msBetween(std::int64_t fromNs, std::int64_t toNs) {
  return static_cast<double>(toNs - fromNs) / 1e6;
}

std::unique_ptr<DistributedLockManager> makeManager(
    std::shared_ptr<LockStore> store, LockConfiguration config) {
  auto m = DistributedLockManager::builder()
               .clientId("faults")
               .farmId("farm1")
               .store(std::move(store))
               .configuration(config)
               .build();
  m->initialize();
  return m;
}

class ServerRestart : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = clusterDir();
    ASSERT_FALSE(dir_.empty())
        << "DLM_TEST_PG_DIR must name the throwaway cluster "
           "(scripts/test.sh sets it; scripts/pg-cluster.sh start DIR)";
    env_ = makePostgresEnvironment();
  }
  void TearDown() override {
    if (dir_.empty()) return;
    // The tests after this one need the server: make sure it is back.
    auto admin = connectWithin(30s);
    if (!env_) return;
    // The restart broke the environment's own admin connection, so it
    // cannot drop its schema and role (it says so on stderr): do it here.
    const std::string schema = env_->postgresSchema();
    const std::string role = roleOfUrl(env_->url());
    env_.reset();
    pqxx::nontransaction tx(*admin);
    tx.exec("DROP SCHEMA IF EXISTS " + tx.quote_name(schema) + " CASCADE");
    if (!tx.exec_params("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
             .empty()) {
      tx.exec("DROP OWNED BY " + tx.quote_name(role));
      tx.exec("DROP ROLE " + tx.quote_name(role));
    }
  }

  std::string dir_;
  std::unique_ptr<StoreEnvironment> env_;
};

TEST_P(ServerRestart,
       NoOverlapOnlyConnectionErrorsAndAcquisitionsResumeAfterTheCallInFlight) {
  const SchedulingLag lag;
  FleetOptions options;
  options.url = env_->url();
  options.schema = env_->postgresSchema();
  options.operationTimeout = kOperationTimeout;
  WorkerFleet fleet(options);
  const auto connect = [] { return connectWithin(5s); };
  const std::string& schema = options.schema;

  // Restart once the workers are busy: they have made some acquisitions.
  const std::int64_t before =
      waitForStoreAcquisitions(connect, schema, kAcquisitionsBefore,
                               kEnoughWithin);
  RestartTimes restart;
  ASSERT_NO_THROW(restart = restartServer(dir_, GetParam()));
  const std::int64_t upNs = restart.acceptNs;
  // Then until the store has counted enough acquisitions after it.
  const std::int64_t atUp = waitForStoreAcquisitions(connect, schema, 0, 30s);
  const std::int64_t after = waitForStoreAcquisitions(
      connect, schema, atUp + kAcquisitionsAfter, kEnoughWithin);
  fleet.stop();

  std::vector<std::string> problems;
  const auto logs = fleet.collect(problems);
  for (const auto& p : problems) ADD_FAILURE() << p;
  RunFigures figures = summarise(logs, kOperationTimeout, lag.slack(4));
  figures.storeAcquisitions = storeAcquisitions(*connectWithin(5s), schema);
  const auto first = firstAcquireAfter(logs, upNs);
  const double firstMs = first ? msBetween(upNs, *first) : -1;
  const auto bound = kMaxFirstAcquire + lag.slack(4);

  std::printf(
      "[ faults ] restart -m %s: after %lld store acquisitions; server down "
      "%.0f ms; first acquire %s after it accepted connections (bound %lld "
      "ms: %lld configured + %lld scheduling slack); store acquisitions "
      "after it: %lld; %s\n",
      GetParam().c_str(), static_cast<long long>(before), restart.downMs(),
      first ? (std::to_string(static_cast<long long>(firstMs)) + " ms").c_str()
            : "never",
      static_cast<long long>(bound.count()),
      static_cast<long long>(kMaxFirstAcquire.count()),
      static_cast<long long>(lag.slack(4).count()),
      static_cast<long long>(after - atUp), figuresText(figures).c_str());
  EXPECT_GE(before, kAcquisitionsBefore)
      << "the workers did not get going within " << kEnoughWithin.count()
      << " s";
  EXPECT_TRUE(first.has_value())
      << "no acquire succeeded after the restart (the run went on "
      << kEnoughWithin.count() << " s for it)";
  if (first) {
    EXPECT_LE(firstMs, static_cast<double>(bound.count()))
        << "first successful acquire after the server accepted connections";
  }
  expectSafeAndBounded(figures, kAcquisitionsAfter);
}

// The waiter sleeps longer than its timeout, so between its first attempt
// and the one at its deadline only a wake-up makes it try again: returning
// with the lock after the release and before that deadline is proof that
// the release woke it, whatever the machine's load.
TEST_P(ServerRestart, AWaiterSleepingPastItsDeadlineIsWokenByAReleaseAfterIt) {
  const SchedulingLag lag;
  LockConfiguration config;
  config.operationTimeout = kOperationTimeout;
  config.storeRetries = 8;
  config.storeRetryBackoff = 20ms;
  auto holder = makeManager(env_->newStore(), config);
  // Only a wake-up can end this waiter's sleep before its deadline (the
  // jitter shortens a sleep by at most a tenth).
  config.sleepBetweenRetries = 300s;
  auto waiterManager = makeManager(env_->newStore(), config);

  Lock held = holder->getLockInstance("wake", LockLevel::DC);
  holder->acquireLock(held, 300s, 0ms);

  constexpr auto kWaiterTimeout = 60s;
  const std::int64_t waiterDeadlineNs =
      oracle::steadyNowNs() +
      std::chrono::duration_cast<std::chrono::nanoseconds>(kWaiterTimeout)
          .count();
  std::promise<std::pair<std::string, std::int64_t>> waited;
  auto waitedResult = waited.get_future();
  std::thread waiter([&] {
    Lock lock = waiterManager->getLockInstance("wake", LockLevel::DC);
    std::string outcome = "OK";
    try {
      waiterManager->acquireLock(lock, 60s, kWaiterTimeout);
    } catch (const DLMException& e) {
      outcome = std::string(toString(e.code())) + ": " + e.what();
    } catch (const std::exception& e) {
      outcome = std::string("NOT_DLM: ") + e.what();
    }
    const std::int64_t endNs = oracle::steadyNowNs();
    if (lock.isAcquired()) {
      try {
        waiterManager->releaseLock(lock);
      } catch (const std::exception&) {
        // The lock expires; nothing after this test uses the key.
      }
    }
    waited.set_value({outcome, endNs});
  });
  // Let the waiter make its first attempt and go to sleep.
  std::this_thread::sleep_for(1s);

  // No ASSERT until the waiter thread is joined (a return would leave it
  // joinable).
  EXPECT_EQ(waitedResult.wait_for(0s), std::future_status::timeout)
      << "the waiter returned before the restart: it did not wait across it";
  RestartTimes restart;
  EXPECT_NO_THROW(restart = restartServer(dir_, GetParam()));
  const std::int64_t upNs = oracle::steadyNowNs();

  // The holder's first release may meet a connection the restart broke: it
  // still holds then and repeats the call (bounded).
  std::int64_t releaseNs = 0;
  int releaseErrors = 0;
  std::string lastError;
  while (oracle::steadyNowNs() - upNs < 10'000'000'000LL) {
    releaseNs = oracle::steadyNowNs();
    try {
      EXPECT_TRUE(holder->releaseLock(held));
      break;
    } catch (const DLMException& e) {
      ++releaseErrors;
      lastError = std::string(toString(e.code())) + ": " + e.what();
      std::this_thread::sleep_for(50ms);
    }
  }
  EXPECT_FALSE(held.isAcquired())
      << "the holder could not release: " << lastError;

  // Bounded: the waiter's own timeout plus its operation budget and slack.
  if (waitedResult.wait_for(kWaiterTimeout + 10s) !=
      std::future_status::ready) {
    std::fprintf(stderr, "FATAL: acquireLock did not return\n");
    std::_Exit(1);
  }
  waiter.join();
  const auto [outcome, endNs] = waitedResult.get();
  const double wokenMs = msBetween(releaseNs, endNs);
  const auto bound = kMaxWakeUp + lag.slack(6);
  std::printf(
      "[ faults ] restart -m %s: waiter (sleepBetweenRetries 300 s, timeout "
      "60 s) -> %s, %.0f ms after the release made after the restart, %.1f s "
      "before its deadline (bound %lld ms: %lld + %lld scheduling slack); "
      "server down %.0f ms; holder release errors before success: %d%s%s\n",
      GetParam().c_str(), outcome.c_str(), wokenMs,
      msBetween(endNs, waiterDeadlineNs) / 1e3,
      static_cast<long long>(bound.count()),
      static_cast<long long>(kMaxWakeUp.count()),
      static_cast<long long>(lag.slack(6).count()), restart.downMs(),
      releaseErrors, lastError.empty() ? "" : " (",
      lastError.empty() ? "" : (lastError + ")").c_str());
  EXPECT_EQ(outcome, "OK");
  // Order: after the release, before the attempt at the deadline.
  EXPECT_GE(endNs, releaseNs) << "the waiter returned before the release";
  EXPECT_LT(endNs, waiterDeadlineNs)
      << "the waiter was not woken by the release: it waited until its last "
         "attempt at the deadline";
  EXPECT_LE(wokenMs, static_cast<double>(bound.count()))
      << "the waiter was woken late";
}

INSTANTIATE_TEST_SUITE_P(Modes, ServerRestart,
                         ::testing::Values("fast", "immediate"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlm::test::faults
