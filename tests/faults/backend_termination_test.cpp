// Every dlm client backend terminated (pg_terminate_backend), round after
// round (kRounds of them, one every 200 ms at most), under a multi-process
// contention run: mutual exclusion and fencing hold, every error is
// CONNECTION_ERROR / RETRIES_EXHAUSTED, every call ends within its bound
// (plus the scheduling slack this machine shows: support/scheduling_lag.h),
// and the call made right after each mass termination succeeds (a dead
// pooled connection is replaced, not reported). The run lasts until the
// rounds are done and the store has counted enough acquisitions, not for a
// fixed time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "hold_log.h"
#include "dlm/dlm.h"
#include "faults/bounded_call.h"
#include "faults/fault_run.h"
#include "faults/server_control.h"
#include "support/scheduling_lag.h"
#include "support/test_stores.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

constexpr auto kOperationTimeout = 2000ms;
constexpr auto kRoundEvery = 200ms;
constexpr int kRounds = 15;
constexpr std::int64_t kMinAcquisitions = 100;
constexpr auto kEnoughWithin = 60s;

TEST(BackendTermination,
     NoOverlapOnlyConnectionErrorsAndTheCallAfterEachMassTerminationSucceeds) {
  ASSERT_FALSE(clusterDir().empty())
      << "DLM_TEST_PG_DIR must name the throwaway cluster (scripts/test.sh)";
  auto env = makePostgresEnvironment();
  const std::string role = roleOfUrl(env->url());
  ASSERT_FALSE(role.empty()) << env->url();
  // Superuser (PGUSER=postgres on the throwaway cluster), another role than
  // the one whose backends are terminated.
  auto admin = connectWithin(5s);
  const SchedulingLag lag;

  FleetOptions options;
  options.url = env->url();
  options.schema = env->postgresSchema();
  options.operationTimeout = kOperationTimeout;
  WorkerFleet fleet(options);

  // The probe: a manager of this process whose connections die with the
  // others; its next call must succeed.
  LockConfiguration config;
  config.operationTimeout = kOperationTimeout;
  auto probe = DistributedLockManager::builder()
                   .clientId("faults")
                   .farmId("farm1")
                   .store(env->newStore())
                   .configuration(config)
                   .build();
  probe->initialize();
  Lock probeLock = probe->getLockInstance("probe", LockLevel::DC);
  probe->tryAcquireLock(probeLock, 30s);  // opens its pooled connection
  probe->releaseLock(probeLock);

  // The first round once the workers are busy.
  const auto connect = [] { return connectWithin(5s); };
  waitForStoreAcquisitions(connect, env->postgresSchema(), 20, kEnoughWithin);
  int rounds = 0, probeFailures = 0, releaseFailures = 0;
  std::int64_t terminated = 0;
  double probeMaxMs = 0;
  std::string firstFailure;
  while (rounds < kRounds) {
    const auto roundStart = std::chrono::steady_clock::now();
    try {
      terminated += terminateBackends(*admin, role);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "pg_terminate_backend: " << e.what();
      break;
    }
    ++rounds;
    // A hung probe is cut short (nothing to unblock: it is reported).
    const auto got =
        boundedCall([&] { probe->tryAcquireLock(probeLock, 30s); }, 10s, [] {});
    probeMaxMs = std::max(probeMaxMs, got.ms);
    if (got.outcome != "OK") {
      ++probeFailures;
      if (firstFailure.empty()) firstFailure = got.outcome + ": " + got.message;
    } else {
      try {
        probe->releaseLock(probeLock);
      } catch (const DLMException& e) {
        ++releaseFailures;
        if (firstFailure.empty()) {
          firstFailure =
              "release " + std::string(toString(e.code())) + ": " + e.what();
        }
      }
    }
    std::this_thread::sleep_until(roundStart + kRoundEvery);
  }

  // Enough acquisitions in all (the store also counts the few whose reply a
  // kill lost, so half again as many).
  waitForStoreAcquisitions(connect, env->postgresSchema(),
                           kMinAcquisitions * 3 / 2, kEnoughWithin);
  std::vector<std::string> problems;
  const auto logs = fleet.collect(problems);
  for (const auto& p : problems) ADD_FAILURE() << p;
  RunFigures figures = summarise(logs, kOperationTimeout, lag.slack(4));
  figures.storeAcquisitions = storeAcquisitions(*admin, env->postgresSchema());
  std::printf(
      "[ faults ] backend termination: %d rounds every %lld ms, %lld "
      "backends terminated; call right after each: %d OK, %d failed (max "
      "%.0f ms)%s%s; %s\n",
      rounds, static_cast<long long>(kRoundEvery.count()),
      static_cast<long long>(terminated), rounds - probeFailures, probeFailures,
      probeMaxMs, firstFailure.empty() ? "" : ", first: ", firstFailure.c_str(),
      figuresText(figures).c_str());
  EXPECT_EQ(rounds, kRounds);
  EXPECT_GT(terminated, rounds) << "the rounds terminated hardly anything";
  EXPECT_EQ(probeFailures, 0)
      << "the call right after a mass termination failed; first: "
      << firstFailure;
  EXPECT_EQ(releaseFailures, 0) << firstFailure;
  expectSafeAndBounded(figures, kMinAcquisitions);
}

}  // namespace
}  // namespace dlm::test::faults
