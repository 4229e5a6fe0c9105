// Failover of a real pg_auto_failover formation (a monitor, a primary and a
// synchronous standby: scripts/pg-auto-failover.sh, started by
// scripts/ha-test.sh) in the middle of a multi-process contention run that
// reaches it through the multi-host URL with target_session_attrs=read-write:
// by a planned failover (pg_autoctl perform failover), by SIGKILL of the
// primary node (its pg_autoctl and postmaster: the monitor promotes the
// standby), and by SIGKILL of the primary's postmaster alone (its pg_autoctl
// restarts it in place; no failover). Across each: no two holds of conflicting
// keys overlap, no key's fencing token goes backwards, the store has every
// acquisition a caller was told of (none lost in the promotion), every
// caller error is CONNECTION_ERROR / RETRIES_EXHAUSTED within its bound,
// acquisitions resume soon after the new primary takes writes, and a store
// made before the failover LISTENs on the new primary and wakes its waiter.
//
// Each run lasts until the store has counted enough acquisitions before the
// fault and after it (not a fixed time), and every time bound is configured
// times plus the scheduling slack this machine shows during the test
// (support/scheduling_lag.h): a busy machine makes the test slower, not red.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "hold_log.h"
#include "dlm/dlm.h"
#include "dlm/postgres_store.h"
#include "faults/fault_run.h"
#include "faults/fault_scenario.h"
#include "faults/ha_formation.h"
#include "support/scheduling_lag.h"
#include "support/test_stores.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

constexpr auto kOperationTimeout = 2000ms;
// From the instant a read-write connection first reaches the new primary:
// the call in flight ends within its bound (an acquire's: its timeout +
// operationTimeout), and the next call, which first finds the read-write
// host of the URL's list (up to a second), succeeds within its own.
constexpr auto kMaxFirstAcquire =
    kWorkerAcquireTimeout + kOperationTimeout + 1000ms + kOperationTimeout;
// A release reaches a waiter through the server's NOTIFY, the store's
// listener and the manager's wait hub, then the waiter's attempt.
constexpr auto kMaxWakeUp = 2000ms;
constexpr auto kListenFollows = 30s;
// Longer than any run: the waiter's only attempt before its deadline is the
// one a wake-up makes (it sleeps longer than its timeout).
constexpr auto kWaiterTimeout = 150s;
constexpr auto kWaiterSleep = 300s;
// Enough acquisitions to prove something, before the fault and after it.
constexpr std::int64_t kAcquisitionsBefore = 50;
constexpr std::int64_t kAcquisitionsAfter = 100;
constexpr auto kEnoughWithin = 60s;
constexpr const char* kProbeApp = "dlm-ha-probe";

double msBetween(std::int64_t fromNs, std::int64_t toNs) {
  return static_cast<double>(toNs - fromNs) / 1e6;
}

// A superuser connection to the primary (the URL's read-write host), tried
// until `limit`.
std::unique_ptr<pqxx::connection> connectPrimary(
    std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    try {
      return std::make_unique<pqxx::connection>(haUrl());
    } catch (const std::exception&) {
      if (std::chrono::steady_clock::now() >= until) throw;
      std::this_thread::sleep_for(200ms);
    }
  }
}

// The longest time inside [fromNs, toNs] without a successful acquisition
// ending, and where it began.
struct Gap {
  double ms = 0;
  std::int64_t beginNs = 0;
};

Gap longestGap(const std::vector<WorkerLog>& logs, std::int64_t fromNs,
               std::int64_t toNs) {
  std::vector<std::int64_t> ends{fromNs, toNs};
  for (const auto& log : logs) {
    for (const auto& c : log.calls) {
      if (c.kind != "release" && c.outcome == "OK" && c.endNs > fromNs &&
          c.endNs < toNs) {
        ends.push_back(c.endNs);
      }
    }
  }
  std::sort(ends.begin(), ends.end());
  Gap gap;
  for (std::size_t i = 1; i < ends.size(); ++i) {
    const double ms = msBetween(ends[i - 1], ends[i]);
    if (ms > gap.ms) gap = {ms, ends[i - 1]};
  }
  return gap;
}

// Two managers on the formation, made before the failover: the holder takes
// a key, the waiter waits for it sleeping 30 s between attempts (so its
// store LISTENs) across the failover; after it the holder releases, and
// only a release heard on the LISTEN connection, now on the new primary,
// wakes the waiter in time.
class WakeProbe {
 public:
  explicit WakeProbe(const std::string& schema) {
    LockConfiguration config;
    config.operationTimeout = kOperationTimeout;
    config.storeRetries = 8;
    config.storeRetryBackoff = 50ms;
    holder_ = make(schema, config);
    config.sleepBetweenRetries = kWaiterSleep;
    waiter_ = make(schema, config);
    held_.emplace(holder_->getLockInstance("wake", LockLevel::DC));
    holder_->acquireLock(*held_, 600s, 0ms);
    deadlineNs_ = oracle::steadyNowNs() +
                  std::chrono::duration_cast<std::chrono::nanoseconds>(
                      kWaiterTimeout)
                      .count();
    waited_ = std::async(std::launch::async, [this] {
      Lock lock = waiter_->getLockInstance("wake", LockLevel::DC);
      std::string result;
      try {
        waiter_->acquireLock(lock, 30s, kWaiterTimeout);
      } catch (const DLMException& e) {
        result = std::string(toString(e.code())) + ": " + e.what();
      }
      const std::int64_t endNs = oracle::steadyNowNs();
      if (lock.isAcquired()) {
        try {
          waiter_->releaseLock(lock);
        } catch (const DLMException&) {
          // expires with its TTL
        }
      }
      return std::make_pair(result, endNs);
    });
    std::this_thread::sleep_for(1s);  // the waiter asks and goes to sleep
  }
  ~WakeProbe() {
    if (waited_.valid()) waited_.wait();  // bounded by kWaiterTimeout
  }

  // Whether a LISTEN session of the probe is on the server a read-write
  // connection reaches, within `limit`.
  static bool listensOnPrimary(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      try {
        auto admin = connectPrimary(1s);
        pqxx::nontransaction tx(*admin);
        const auto r = tx.exec_params(
            "SELECT count(*) FROM pg_stat_activity WHERE "
            "starts_with(application_name, $1) AND query LIKE 'LISTEN%'",
            std::string(kProbeApp));
        if (r[0][0].as<int>() > 0) return true;
      } catch (const std::exception&) {
        // not up yet
      }
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }

  struct HandOff {
    std::string outcome;  // "" = acquired
    double wokenMs = -1;  // from the release to the waiter's return
    bool inOrder = false;  // after the release, before the waiter's deadline
  };
  // The holder releases (repeating on transient errors: its pooled
  // connections died with the old primary); the waiter's outcome and when
  // it returned.
  HandOff handOff() {
    std::int64_t releaseNs = 0;
    std::string problem = "release: no time";
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < until) {
      releaseNs = oracle::steadyNowNs();
      try {
        problem = holder_->releaseLock(*held_) ? "" : "release: false";
        break;
      } catch (const DLMException& e) {
        problem = std::string("release: ") + e.what();
        std::this_thread::sleep_for(50ms);
      }
    }
    const auto [result, endNs] = waited_.get();
    if (!problem.empty()) return {problem, -1, false};
    return {result, msBetween(releaseNs, endNs),
            endNs >= releaseNs && endNs < deadlineNs_};
  }

 private:
  std::unique_ptr<DistributedLockManager> make(const std::string& schema,
                                               const LockConfiguration& c) {
    PostgresStoreOptions o;
    o.connection = haUrl();
    o.schema = schema;
    o.applicationName = kProbeApp;
    // The formation replicates synchronously: initialize() must accept it.
    o.synchronousReplication = SynchronousReplication::REQUIRED;
    auto m = DistributedLockManager::builder()
                 .clientId("probe")
                 .farmId("farm1")
                 .store(std::make_shared<PostgresStore>(o))
                 .configuration(c)
                 .build();
    m->initialize();
    return m;
  }

  std::unique_ptr<DistributedLockManager> holder_;
  std::unique_ptr<DistributedLockManager> waiter_;
  std::optional<Lock> held_;
  std::int64_t deadlineNs_ = 0;
  std::future<std::pair<std::string, std::int64_t>> waited_;
};

class Failover : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(haUrl().empty() || haDir().empty())
        << "DLM_TEST_HA_URL and DLM_TEST_HA_DIR must name the formation "
           "(scripts/ha-test.sh starts it)";
    ASSERT_TRUE(runFormationScript("wait-healthy", "180"))
        << "the formation has no primary and secondary";
    const auto port = primaryPort(30s);
    ASSERT_TRUE(port.has_value()) << "no primary reachable through the URL";
    oldPrimary_ = *port;
    schema_ = uniqueName("dlm_ha");
    auto admin = connectPrimary(10s);
    pqxx::nontransaction(*admin).exec("CREATE SCHEMA " +
                                      admin->quote_name(schema_));
    PostgresStoreOptions o;
    o.connection = haUrl();
    o.schema = schema_;
    PostgresStore(o).initialize(/*applyMigrations=*/true);
  }

  void TearDown() override {
    if (schema_.empty()) return;
    // The next test (and the script's stop) want a healthy formation.
    EXPECT_TRUE(runFormationScript("wait-healthy", "180"));
    try {
      auto admin = connectPrimary(30s);
      pqxx::nontransaction(*admin).exec(
          "DROP SCHEMA IF EXISTS " + admin->quote_name(schema_) + " CASCADE");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "could not drop schema %s: %s\n", schema_.c_str(),
                   e.what());
    }
  }

  // A contention run with `fault` made once the workers are busy, lasting
  // until the store has counted enough acquisitions after it; checks and
  // prints the failover figures.
  void runWithFault(const char* name, const std::function<bool()>& fault,
                    bool promotes) {
    const SchedulingLag lag;
    WakeProbe probe(schema_);
    FleetOptions options;
    options.url = haUrl();
    options.schema = schema_;
    options.operationTimeout = kOperationTimeout;
    WorkerFleet fleet(options);
    const auto connect = [] { return connectPrimary(5s); };

    const std::int64_t before = waitForStoreAcquisitions(
        connect, schema_, kAcquisitionsBefore, kEnoughWithin);
    const std::int64_t faultNs = oracle::steadyNowNs();
    auto faultDone = std::async(std::launch::async, fault);
    std::optional<std::int64_t> promotedNs;
    if (promotes) {
      promotedNs = waitForNewPrimary(oldPrimary_, 90s);
    } else {
      faultDone.wait();  // the kill is made when the script returns
      if (primaryPort(30s)) promotedNs = oracle::steadyNowNs();
    }
    const bool faultOk = faultDone.get();
    const std::int64_t faultDoneNs = oracle::steadyNowNs();
    std::int64_t after = -1;
    if (promotedNs) {
      const std::int64_t atPromotion =
          waitForStoreAcquisitions(connect, schema_, 0, 30s);
      after = waitForStoreAcquisitions(
                  connect, schema_, atPromotion + kAcquisitionsAfter,
                  kEnoughWithin) -
              atPromotion;
    }
    fleet.stop();

    std::vector<std::string> problems;
    const auto logs = fleet.collect(problems);
    for (const auto& p : problems) ADD_FAILURE() << p;
    RunFigures figures = summarise(logs, kOperationTimeout, lag.slack(4));
    figures.storeAcquisitions =
        storeAcquisitions(*connectPrimary(30s), schema_);
    const Gap gap = longestGap(logs, fleet.startAtNs(), fleet.endAtNs());
    const auto first =
        promotedNs ? firstAcquireAfter(logs, *promotedNs) : std::nullopt;
    const double firstMs = first ? msBetween(*promotedNs, *first) : -1;
    const auto firstBound = kMaxFirstAcquire + lag.slack(4);

    const bool follows = WakeProbe::listensOnPrimary(kListenFollows);
    const WakeProbe::HandOff wake =
        follows ? probe.handOff() : WakeProbe::HandOff{"-", -1, false};
    const auto wakeBound = kMaxWakeUp + lag.slack(6);

    std::printf(
        "[ failover ] %s: after %lld store acquisitions; script %s in %.1f "
        "s; new primary writable %.1f s after the fault; first acquire %.0f "
        "ms after that (bound %lld ms: %lld configured + %lld scheduling "
        "slack); store acquisitions after it: %lld; longest time without an "
        "acquisition %.1f s (from %.1f s after the fault); LISTEN on the new "
        "primary: %s; waiter woken %.0f ms after the release (%s, bound %lld "
        "ms); %s\n",
        name, static_cast<long long>(before), faultOk ? "succeeded" : "FAILED",
        msBetween(faultNs, faultDoneNs) / 1e3,
        promotedNs ? msBetween(faultNs, *promotedNs) / 1e3 : -1.0, firstMs,
        static_cast<long long>(firstBound.count()),
        static_cast<long long>(kMaxFirstAcquire.count()),
        static_cast<long long>(lag.slack(4).count()),
        static_cast<long long>(after), gap.ms / 1e3,
        msBetween(faultNs, gap.beginNs) / 1e3, follows ? "yes" : "no",
        wake.wokenMs, wake.outcome.empty() ? "acquired" : wake.outcome.c_str(),
        static_cast<long long>(wakeBound.count()),
        figuresText(figures).c_str());
    std::fflush(stdout);

    EXPECT_TRUE(faultOk) << name << ": the formation script failed";
    EXPECT_GE(before, kAcquisitionsBefore)
        << "the workers did not get going within " << kEnoughWithin.count()
        << " s";
    ASSERT_TRUE(promotedNs.has_value())
        << (promotes ? "no other node became the primary within 90 s"
                     : "the primary did not take writes again within 30 s");
    EXPECT_TRUE(first.has_value())
        << "no acquire succeeded after promotion (the run went on "
        << kEnoughWithin.count() << " s for it)";
    if (first) {
      EXPECT_LE(firstMs, static_cast<double>(firstBound.count()));
    }
    expectSafeAndBounded(figures, kAcquisitionsAfter);
    EXPECT_TRUE(follows) << "no LISTEN session of the probe's stores on the "
                            "new primary within 30 s";
    EXPECT_EQ(wake.outcome, "");
    if (follows) {
      // Order first: only a wake-up ends the waiter's sleep before its
      // deadline.
      EXPECT_TRUE(wake.inOrder)
          << "the waiter was not woken by the release (it returned at its "
             "deadline, or before the release)";
      EXPECT_LE(wake.wokenMs, static_cast<double>(wakeBound.count()))
          << "woken late";
    }
  }

  int oldPrimary_ = 0;
  std::string schema_;
};

TEST_F(Failover, PlannedFailoverLosesNoLockAndNoFencingOrder) {
  runWithFault(
      "planned failover (pg_autoctl perform failover)",
      [] { return runFormationScript("failover"); }, /*promotes=*/true);
}

// The node's pg_autoctl and its postmaster, a crashed machine: the monitor
// promotes the standby (a postmaster killed alone is restarted in place by
// its pg_autoctl within a second, and the monitor does nothing: next test).
TEST_F(Failover, PrimaryNodeKilledLosesNoLockAndNoFencingOrder) {
  runWithFault(
      "SIGKILL of the primary node (pg_autoctl and postmaster)",
      [] { return runFormationScript("kill-primary"); }, /*promotes=*/true);
}

TEST_F(Failover, PrimaryPostmasterKilledAndRestartedInPlace) {
  runWithFault(
      "SIGKILL of the primary's postmaster (restarted in place)",
      [] { return runFormationScript("kill-postmaster"); },
      /*promotes=*/false);
}

}  // namespace
}  // namespace dlm::test::faults
