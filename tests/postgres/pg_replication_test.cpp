// PostgresStoreOptions::synchronousReplication against the throwaway server,
// which has no standby: REQUIRED refuses to initialize, WARN tells the
// store's warning listeners (a manager: a STORE_WARNING event) and goes on,
// writing nothing to stderr; NOT_CHECKED says nothing. (The formation of
// scripts/pg-auto-failover.sh, which has a synchronous standby, is where
// REQUIRED initializes: tests/faults/failover_test.cpp.)
#include "postgres/pg_replication.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock_manager.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_migrate.h"
#include "support/error_code.h"
#include "support/pg_test_support.h"
#include "support/recorded_events.h"

namespace dlm::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class Warnings final : public StoreWarningListener {
 public:
  void storeWarning(std::string_view message) override {
    messages.emplace_back(message);
  }
  std::vector<std::string> messages;
};

class SynchronousReplicationCheck : public ::testing::Test {
 protected:
  SynchronousReplicationCheck() {
    internal::applyPostgresMigrations(schema_.options());
  }
  PostgresStoreOptions options(SynchronousReplication policy) const {
    PostgresStoreOptions o = schema_.options();
    o.synchronousReplication = policy;
    return o;
  }
  FreshSchema schema_;
};

TEST_F(SynchronousReplicationCheck, RequiredRefusesAServerWithoutAStandby) {
  PostgresStore store(options(SynchronousReplication::REQUIRED));
  const DLMException e = errorOf([&] { store.initialize(false); });
  EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
  EXPECT_TRUE(contains(e.what(), "synchronous_standby_names")) << e.what();
  EXPECT_TRUE(contains(e.what(), "failover")) << e.what();
}

TEST_F(SynchronousReplicationCheck, WarnTellsTheListenersNotStderr) {
  PostgresStore store(options(SynchronousReplication::WARN));
  Warnings warnings;
  store.addWarningListener(&warnings);
  ::testing::internal::CaptureStderr();
  store.initialize(false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  store.removeWarningListener(&warnings);
  ASSERT_EQ(warnings.messages.size(), 1U);
  EXPECT_TRUE(contains(warnings.messages[0],
                       "PostgreSQL store: acquires do not wait for a standby"))
      << warnings.messages[0];
}

TEST_F(SynchronousReplicationCheck, WarnIsAStoreWarningEventOfTheManager) {
  auto store =
      std::make_shared<PostgresStore>(options(SynchronousReplication::WARN));
  auto events = std::make_shared<RecordedEvents>();
  auto manager = DistributedLockManager::builder()
                     .clientId("replication")
                     .farmId("farm1")
                     .store(store)
                     .events(events)
                     .build();
  ::testing::internal::CaptureStderr();
  manager->initialize();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  const auto warnings = events->of(LockEventKind::STORE_WARNING);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0].clientId, "replication");
  EXPECT_TRUE(
      contains(warnings[0].message, "acquires do not wait for a standby"))
      << warnings[0].message;
  EXPECT_TRUE(contains(formatEvent(warnings[0]), "STORE_WARNING"));
  EXPECT_EQ(severityOf(warnings[0]), 4);
}

TEST_F(SynchronousReplicationCheck, NotCheckedIsSilent) {
  PostgresStore store(options(SynchronousReplication::NOT_CHECKED));
  Warnings warnings;
  store.addWarningListener(&warnings);
  ::testing::internal::CaptureStderr();
  store.initialize(false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  store.removeWarningListener(&warnings);
  EXPECT_TRUE(warnings.messages.empty());
}

// The rule itself (no server can be given synchronous_standby_names here
// without stalling every other test's commits).
TEST(SynchronousReplicationRule, NeedsAStandbyNameAndARemoteCommitLevel) {
  using internal::whyAcquiresAreNotReplicated;
  EXPECT_EQ(whyAcquiresAreNotReplicated({"on", "ANY 1 (node_2)"}), "");
  EXPECT_EQ(whyAcquiresAreNotReplicated({"remote_apply", "s1"}), "");
  EXPECT_EQ(whyAcquiresAreNotReplicated({"remote_write", "s1"}), "");
  // The acquire functions raise off to on for their own transaction.
  EXPECT_EQ(whyAcquiresAreNotReplicated({"off", "s1"}), "");
  EXPECT_TRUE(contains(whyAcquiresAreNotReplicated({"local", "s1"}), "local"));
  EXPECT_TRUE(contains(whyAcquiresAreNotReplicated({"on", ""}),
                       "synchronous_standby_names is empty"));
}

}  // namespace
}  // namespace dlm::test
