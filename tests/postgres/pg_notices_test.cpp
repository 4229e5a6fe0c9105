// Server notices on the store's connections (PgConn): the SQLSTATE a
// connection keeps (DL001, a first-use binding) is kept with its message
// and hint until taken; every other notice is dropped, nothing is printed,
// and a notice of a call that then failed (rolled back) is dropped too.
// Raised here by DO blocks, so the plumbing is tested whatever the schema.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "dlm/deadline.h"
#include "postgres/pg_conn.h"
#include "postgres/store_notices.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;
using internal::PgConn;

// RAISE NOTICE with SQLSTATE `state`, then (with `fail`) an error.
std::string raising(const std::string& state, const std::string& message,
                    bool fail = false) {
  return "DO $$BEGIN RAISE NOTICE USING MESSAGE = '" + message +
         "', ERRCODE = '" + state +
         "', HINT = 'bind it with dlmctl clients bind';" +
         (fail ? " RAISE EXCEPTION 'the call fails';" : "") + " END$$";
}

std::unique_ptr<PgConn> keeping(const std::string& state) {
  auto conn = PgConn::open(internal::ConnParams::parse(""), deadlineAfter(10s));
  conn->keepNotices(state);
  return conn;
}

TEST(PgNotices, TheKeptSqlstateIsKeptWithItsHintUntilTaken) {
  auto conn = keeping(internal::kFirstUseBindingState);
  ::testing::internal::CaptureStderr();
  conn->exec(raising("DL001", "dlm: client \"c\" was bound"),
             deadlineAfter(10s));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  const auto notices = conn->takeNotices();
  ASSERT_EQ(notices.size(), 1U);
  EXPECT_EQ(notices[0].sqlstate, "DL001");
  EXPECT_EQ(notices[0].message, "dlm: client \"c\" was bound");
  EXPECT_EQ(notices[0].hint, "bind it with dlmctl clients bind");
  EXPECT_EQ(internal::warningText(notices[0]),
            "dlm: client \"c\" was bound; bind it with dlmctl clients bind");
  EXPECT_TRUE(conn->takeNotices().empty()) << "taken twice";
}

TEST(PgNotices, OtherNoticesAreDroppedAndNeverPrinted) {
  auto conn = keeping(internal::kFirstUseBindingState);
  ::testing::internal::CaptureStderr();
  conn->exec("DO $$BEGIN RAISE NOTICE 'plain'; RAISE WARNING 'loud'; END$$",
             deadlineAfter(10s));
  conn->exec(raising("DL002", "another code"), deadlineAfter(10s));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(conn->takeNotices().empty());
}

TEST(PgNotices, NothingIsKeptUnlessAsked) {
  auto conn = PgConn::open(internal::ConnParams::parse(""), deadlineAfter(10s));
  ::testing::internal::CaptureStderr();
  conn->exec(raising("DL001", "unasked"), deadlineAfter(10s));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_TRUE(conn->takeNotices().empty());
}

TEST(PgNotices, ANoticeOfACallThatFailedIsDropped) {
  auto conn = keeping(internal::kFirstUseBindingState);
  conn->exec(raising("DL001", "kept"), deadlineAfter(10s));
  EXPECT_THROW(conn->exec(raising("DL001", "rolled back", /*fail=*/true),
                          deadlineAfter(10s)),
               internal::PgError);
  const auto notices = conn->takeNotices();
  ASSERT_EQ(notices.size(), 1U) << "the rolled-back call's notice was kept";
  EXPECT_EQ(notices[0].message, "kept");
}

TEST(PgNotices, PipelinedCallsKeepAndDropAlike) {
  // Pooler-safe mode: settings and statement in one implicit transaction.
  auto conn = keeping(internal::kFirstUseBindingState);
  conn->sendSettingsWithEachCall("SELECT set_config('lock_timeout', $1, true)",
                                 {"1000"});
  const internal::PreparedStatement ok{"ok", raising("DL001", "pipelined")};
  const internal::PreparedStatement failing{
      "failing", raising("DL001", "pipelined, rolled back", /*fail=*/true)};
  conn->execPrepared(ok, {}, deadlineAfter(10s));
  EXPECT_THROW(conn->execPrepared(failing, {}, deadlineAfter(10s)),
               internal::PgError);
  const auto notices = conn->takeNotices();
  ASSERT_EQ(notices.size(), 1U);
  EXPECT_EQ(notices[0].message, "pipelined");
}

TEST(PgNotices, AFloodKeepsAtMostTheCap) {
  auto conn = keeping(internal::kFirstUseBindingState);
  conn->exec(
      "DO $$BEGIN FOR i IN 1..100 LOOP RAISE NOTICE USING MESSAGE = 'n' || i, "
      "ERRCODE = 'DL001'; END LOOP; END$$",
      deadlineAfter(10s));
  const auto notices = conn->takeNotices();
  ASSERT_EQ(notices.size(), PgConn::kMaxKeptNotices);
  EXPECT_EQ(notices[0].message, "n1");
  EXPECT_EQ(notices[0].hint, "");
}

}  // namespace
}  // namespace dlm::test
