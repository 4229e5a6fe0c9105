// A release the library makes on its own, in a destructor, that fails: it
// becomes a RELEASE_FAILED event of the manager (and a counter), never a
// line on stderr. Also the guard's commitLock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "dlm/dlm.h"
#include "support/fake_store.h"
#include "dlm/lock_store_wrapper.h"
#include "support/recorded_events.h"
#include "support/single_call_batches.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// Fails the next `failures` releases with a non-transient INTERNAL_ERROR
// (no store retries).
class FailingReleaseStore final : public SingleCallBatches {
 public:
  using SingleCallBatches::SingleCallBatches;
  bool release(const StoreKey& key, std::string_view token,
               LockMode mode) override {
    if (failures > 0) {
      --failures;
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         "fake store: release refused");
    }
    return LockStoreWrapper::release(key, token, mode);
  }
  std::atomic<int> failures{0};
};

class ReleaseFailedTest : public ::testing::Test {
 protected:
  std::unique_ptr<DistributedLockManager> manager() {
    auto m = DistributedLockManager::builder()
                 .clientId("app")
                 .farmId("f")
                 .store(store_)
                 .events(events_)
                 .build();
    m->initialize();
    return m;
  }

  std::shared_ptr<FakeStore> fake_ = std::make_shared<FakeStore>();
  std::shared_ptr<FailingReleaseStore> store_ =
      std::make_shared<FailingReleaseStore>(fake_);
  std::shared_ptr<RecordedEvents> events_ = std::make_shared<RecordedEvents>();
};

TEST_F(ReleaseFailedTest, AGuardWhoseReleaseThrowsReportsAnEventNotStderr) {
  auto m = manager();
  Lock lock = m->getLockInstance("orders.42", LockLevel::DC);
  m->tryAcquireLock(lock);
  const std::int64_t fencing = lock.fencingToken();
  store_->failures = 1;
  testing::internal::CaptureStderr();
  {
    LockGuard guard(*m, std::move(lock), KeepAliveOptions{false, {}});
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");

  const auto failed = events_->of(LockEventKind::RELEASE_FAILED);
  ASSERT_EQ(failed.size(), 1U);
  EXPECT_EQ(failed[0].lockId, "app#orders.42");
  EXPECT_EQ(failed[0].clientId, "app");
  EXPECT_EQ(failed[0].fencingToken, fencing);
  EXPECT_EQ(failed[0].code, ErrorCode::INTERNAL_ERROR);
  EXPECT_NE(failed[0].message.find("release refused"), std::string::npos);
  EXPECT_EQ(m->metrics().releaseFailures, 1U);
  EXPECT_EQ(severityOf(failed[0]), 4);
  const std::string line = formatEvent(failed[0]);
  EXPECT_NE(line.find("RELEASE_FAILED client=app lock=DC#f#app#orders.42"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("code=INTERNAL_ERROR"), std::string::npos) << line;
  EXPECT_NE(toPrometheusText({m->metrics()})
                .find("dlm_release_failures_total{client=\"app\"} 1"),
            std::string::npos);
}

TEST_F(ReleaseFailedTest, AGuardWhoseReleaseWorksReportsNoFailure) {
  auto m = manager();
  Lock lock = m->getLockInstance("orders.42", LockLevel::DC);
  m->tryAcquireLock(lock);
  { LockGuard guard(*m, std::move(lock), KeepAliveOptions{false, {}}); }
  EXPECT_EQ(events_->count(LockEventKind::RELEASE_FAILED), 0U);
  EXPECT_EQ(events_->count(LockEventKind::RELEASED), 1U);
  EXPECT_EQ(m->metrics().releaseFailures, 0U);
}

TEST_F(ReleaseFailedTest, AClusteredServiceWhoseReleaseThrowsReportsAnEvent) {
  auto m = manager();
  testing::internal::CaptureStderr();
  {
    ClusteredLockService service(*m, LockLevel::DC);
    ASSERT_TRUE(service.getLock("jobs.7", 30s));
    store_->failures = 1;
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  const auto failed = events_->of(LockEventKind::RELEASE_FAILED);
  ASSERT_EQ(failed.size(), 1U);
  EXPECT_EQ(failed[0].lockId, "app#jobs.7");
  EXPECT_EQ(failed[0].code, ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(m->metrics().releaseFailures, 1U);
}

TEST_F(ReleaseFailedTest, AGuardsCommitLockReleasesWithTheTransaction) {
  auto m = manager();
  Lock lock = m->getLockInstance("orders.42", LockLevel::DC);
  m->tryAcquireLock(lock);
  const std::string key = lock.storeKey();
  LockGuard guard(*m, std::move(lock), KeepAliveOptions{false, {}});
  FakeTransaction tx;
  guard.commitLock(tx);
  EXPECT_TRUE(fake_->describe(key)->held);
  tx.commit();
  EXPECT_FALSE(fake_->describe(key)->held);
}

}  // namespace
}  // namespace dlm::test
