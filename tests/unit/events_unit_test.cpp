// Events and metrics against the fake store: store errors and
// reconnections (a store made to fail), the line format and its handlers,
// and the Prometheus text.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/lock_store_wrapper.h"
#include "support/error_code.h"
#include "support/fake_store.h"
#include "support/recorded_events.h"
#include "support/single_call_batches.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// Fails the next `failures` acquire attempts with a transient
// CONNECTION_ERROR whose message quotes a password-free URL, and reports
// `reconnects` as its reconnection count.
class FlakyStore final : public SingleCallBatches {
 public:
  using SingleCallBatches::SingleCallBatches;
  AcquireResult tryAcquire(const AcquireRequest& request) override {
    if (failures > 0) {
      --failures;
      throw DLMException(ErrorCode::CONNECTION_ERROR,
                         "fake store: connection to postgresql://app@db lost",
                         true);
    }
    return LockStoreWrapper::tryAcquire(request);
  }
  std::uint64_t reconnections() const override { return reconnects.load(); }
  std::atomic<int> failures{0};
  std::atomic<std::uint64_t> reconnects{0};
};

std::unique_ptr<DistributedLockManager> managerOn(
    std::shared_ptr<LockStore> store,
    std::shared_ptr<LockEventHandler> events) {
  LockConfiguration config;
  config.storeRetries = 3;
  config.storeRetryBackoff = 1ms;
  auto m = DistributedLockManager::builder()
               .clientId("app")
               .farmId("f")
               .store(std::move(store))
               .configuration(config)
               .events(std::move(events))
               .build();
  m->initialize();
  return m;
}

// A store with the protocol side only.
class ProtocolOnlyStore final : public LockStoreWrapper {
 public:
  using LockStoreWrapper::LockStoreWrapper;
  LockStoreAdmin* admin() override { return nullptr; }
};

TEST(StoreWarnings, AreStoreWarningEventsOfEveryManagerOnTheStore) {
  auto fake = std::make_shared<FakeStore>();
  auto wrapped = std::make_shared<LockStoreWrapper>(fake);
  auto events = std::make_shared<RecordedEvents>();
  auto other = std::make_shared<RecordedEvents>();
  auto m = managerOn(wrapped, events);
  {
    auto n = managerOn(fake, other);
    fake->warn("acquires do not wait for a standby");
  }
  fake->warn("once more");  // the destroyed manager no longer listens
  const auto warnings = events->of(LockEventKind::STORE_WARNING);
  ASSERT_EQ(warnings.size(), 2U);
  EXPECT_EQ(warnings[0].message, "acquires do not wait for a standby");
  EXPECT_EQ(warnings[0].clientId, "app");
  EXPECT_EQ(severityOf(warnings[0]), 4);
  EXPECT_NE(formatEvent(warnings[0])
                .find("STORE_WARNING client=app "
                      "message=\"acquires do not"),
            std::string::npos)
      << formatEvent(warnings[0]);
  EXPECT_EQ(other->count(LockEventKind::STORE_WARNING), 1U);
}

TEST(StoreWithoutAdmin, LocksWorkButDescribeLockIsRefused) {
  auto store =
      std::make_shared<ProtocolOnlyStore>(std::make_shared<FakeStore>());
  auto events = std::make_shared<RecordedEvents>();
  auto m = managerOn(store, events);
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_EQ(codeOf([&] { m->describeLock(lock); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { m->describeHolders(lock); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([&] { adminOf(*store); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(events->count(LockEventKind::STORE_ERROR), 0U);
  EXPECT_TRUE(m->releaseLock(lock));
}

TEST(EventsOnAFailingStore, EachFailedStoreCallIsAStoreErrorAndCounted) {
  auto store = std::make_shared<FlakyStore>(std::make_shared<FakeStore>());
  auto events = std::make_shared<RecordedEvents>();
  auto m = managerOn(store, events);
  store->failures = 2;  // two failures, then the third try works
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  const auto errors = events->of(LockEventKind::STORE_ERROR);
  ASSERT_EQ(errors.size(), 2U);
  EXPECT_EQ(errors[0].code, ErrorCode::CONNECTION_ERROR);
  EXPECT_NE(errors[0].message.find("connection to postgresql://app@db lost"),
            std::string::npos);
  EXPECT_EQ(m->metrics().storeErrors.at(ErrorCode::CONNECTION_ERROR), 2U);
  EXPECT_EQ(events->count(LockEventKind::ACQUIRED), 1U);
}

TEST(EventsOnAFailingStore, AReconnectionIsReportedOnceByTheNextCall) {
  auto store = std::make_shared<FlakyStore>(std::make_shared<FakeStore>());
  auto events = std::make_shared<RecordedEvents>();
  auto m = managerOn(store, events);
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_EQ(events->count(LockEventKind::STORE_RECONNECTED), 0U);
  store->reconnects = 2;
  m->releaseLock(lock);
  m->tryAcquireLock(lock);
  const auto reconnected = events->of(LockEventKind::STORE_RECONNECTED);
  ASSERT_EQ(reconnected.size(), 1U);
  EXPECT_NE(reconnected[0].message.find("2 dead connection"), std::string::npos)
      << reconnected[0].message;
  EXPECT_EQ(m->metrics().storeReconnects, 2U);
}

TEST(EventLines, NameTheKindAndEveryFieldOnOneLine) {
  LockEvent e;
  e.kind = LockEventKind::WAITING;
  e.at = std::chrono::system_clock::time_point(1'764'000'000'123ms);
  e.clientId = "app";
  e.lockId = "app#orders.42";
  e.key = "DC#f#app#orders.42";
  e.waited = 1500ms;
  e.attempts = 3;
  LockBlocker b;
  b.key = "DC#f#app#orders";
  b.owner = "owner 1";
  b.host = "web-1";
  b.pid = 4242;
  e.blocker = b;
  const std::string line = formatEvent(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("2025-11-24T16:00:00.123Z dlm WAITING client=app", 0),
            0U)
      << line;
  for (const char* field :
       {" lock=DC#f#app#orders.42", " mode=EXCLUSIVE", " waited_ms=1500",
        " attempts=3", " blocked_by=DC#f#app#orders",
        " holder_owner=\"owner 1\"", " holder_host=web-1",
        " holder_pid=4242"}) {
    EXPECT_NE(line.find(field), std::string::npos) << field << " in " << line;
  }
  e.kind = LockEventKind::STORE_ERROR;
  e.code = ErrorCode::RETRIES_EXHAUSTED;
  e.message = "busy \"db\"\nagain";
  const std::string error = formatEvent(e);
  EXPECT_NE(error.find(" code=RETRIES_EXHAUSTED"), std::string::npos);
  EXPECT_NE(error.find(" message=\"busy \\\"db\\\"\\nagain\""),
            std::string::npos)
      << error;
  EXPECT_EQ(severityOf(e), 4);
  e.kind = LockEventKind::ACQUIRED;
  EXPECT_EQ(severityOf(e), 6);
}

TEST(EventHandlers, StreamAndLineHandlersWriteOneLinePerEvent) {
  std::ostringstream out;
  auto stream = makeStreamEventHandler(out);
  std::vector<std::pair<int, std::string>> lines;
  auto line = makeLineEventHandler([&](int severity, const std::string& l) {
    lines.emplace_back(severity, l);
  });
  LockEvent e;
  e.kind = LockEventKind::DEADLOCK;
  e.clientId = "app";
  e.lockId = "app#a";
  e.cycle = {"DC#f#app#a", "DC#f#app#b"};
  stream->onEvent(e);
  stream->onEvent(e);
  line->onEvent(e);
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
  EXPECT_NE(text.find("cycle=\"DC#f#app#a -> DC#f#app#b\""), std::string::npos)
      << text;
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(lines[0].first, 4);
  EXPECT_EQ(lines[0].second + "\n", text.substr(0, text.find('\n') + 1));
}

// The exposition format, line by line: HELP and TYPE once per family,
// cumulative buckets ending in +Inf equal to _count, labels escaped.
TEST(PrometheusText, IsStrictlyTheExpositionFormat) {
  LockMetrics a;
  a.clientId = "app \"one\"";
  a.acquisitions = 7;
  a.storeErrors[ErrorCode::CONNECTION_ERROR] = 2;
  a.acquireLatency.counts[0] = 3;
  a.acquireLatency.counts[4] = 4;
  a.acquireLatency.count = 7;
  a.acquireLatency.sumSeconds = 0.0375;
  LockMetrics b;
  b.clientId = "two";
  const std::string text = toPrometheusText({a, b});
  EXPECT_NE(text.find("# TYPE dlm_acquisitions_total counter\n"),
            std::string::npos);
  EXPECT_NE(text.find("dlm_acquisitions_total{client=\"app \\\"one\\\"\"} 7\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("dlm_acquisitions_total{client=\"two\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("dlm_store_errors_total{client=\"app \\\"one\\\"\","
                      "code=\"CONNECTION_ERROR\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("dlm_acquire_duration_seconds_bucket{client=\"two\","
                      "le=\"+Inf\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("dlm_acquire_duration_seconds_bucket{client=\"app "
                      "\\\"one\\\"\",le=\"0.0005\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("le=\"0.01\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"+Inf\"} 7\n"), std::string::npos);
  EXPECT_NE(text.find("dlm_acquire_duration_seconds_sum{client=\"app "
                      "\\\"one\\\"\"} 0.0375\n"),
            std::string::npos)
      << text;
  // Every line: a comment, or name{labels} value.
  std::istringstream lines(text);
  std::string l;
  std::map<std::string, int> types;
  while (std::getline(lines, l)) {
    ASSERT_FALSE(l.empty());
    if (l.rfind("# TYPE ", 0) == 0) {
      ++types[l.substr(7, l.find(' ', 7) - 7)];
      continue;
    }
    if (l.rfind("# HELP ", 0) == 0) continue;
    const auto brace = l.find('{');
    const auto close = l.rfind('}');
    ASSERT_NE(brace, std::string::npos) << l;
    ASSERT_NE(close, std::string::npos) << l;
    EXPECT_EQ(l.rfind("dlm_", 0), 0U) << l;
    EXPECT_EQ(l[close + 1], ' ') << l;
    EXPECT_NO_THROW((void)std::stod(l.substr(close + 2))) << l;
  }
  for (const auto& [family, n] : types) EXPECT_EQ(n, 1) << family;
  EXPECT_EQ(types.size(), 14U);
}

}  // namespace
}  // namespace dlm::test
