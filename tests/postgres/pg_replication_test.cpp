// PostgresStoreOptions::synchronousReplication against the throwaway server,
// which has no standby: REQUIRED refuses to initialize, WARN says so on
// stderr and goes on, NOT_CHECKED says nothing. (The formation of
// scripts/pg-auto-failover.sh, which has a synchronous standby, is where
// REQUIRED initializes: tests/faults/failover_test.cpp.)
#include "postgres/pg_replication.h"

#include <gtest/gtest.h>

#include <string>

#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_migrate.h"
#include "support/error_code.h"
#include "support/pg_test_support.h"

namespace dlm::test {
namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

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

TEST_F(SynchronousReplicationCheck, WarnSaysSoOnStderrAndInitializes) {
  PostgresStore store(options(SynchronousReplication::WARN));
  ::testing::internal::CaptureStderr();
  store.initialize(false);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err,
                       "dlm: warning: PostgreSQL store: acquires do not "
                       "wait for a standby"))
      << err;
}

TEST_F(SynchronousReplicationCheck, NotCheckedIsSilent) {
  PostgresStore store(options(SynchronousReplication::NOT_CHECKED));
  ::testing::internal::CaptureStderr();
  store.initialize(false);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
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
