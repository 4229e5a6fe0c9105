// Store events on SQLite: a file whose write lock another connection keeps
// makes each try wait out its busy timeout and fail; every failed try is a
// STORE_ERROR event (RETRIES_EXHAUSTED) and counted, and the call still
// ends within its bound. SQLite has no connection to lose: no
// STORE_RECONNECTED (reconnections() stays 0).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "sqlite_test_util.h"
#include "support/error_code.h"
#include "support/recorded_events.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

TEST(SqliteEvents, ABusyFileGivesAStoreErrorPerFailedTry) {
  sqlite_test::TempDir dir;
  const std::string path = dir.file("events.sqlite");
  SqliteStoreOptions o;
  o.path = path;
  o.busyTimeout = 100ms;
  auto store = std::make_shared<SqliteStore>(o);
  auto events = std::make_shared<RecordedEvents>();
  LockConfiguration config;
  config.storeRetries = 2;
  config.storeRetryBackoff = 10ms;
  config.operationTimeout = 3s;
  auto m = DistributedLockManager::builder()
               .clientId("app")
               .farmId("f")
               .store(store)
               .configuration(config)
               .events(events)
               .applyMigrations(true)
               .build();
  m->initialize();

  sqlite_test::RawDb other(path);
  other.exec("BEGIN IMMEDIATE");  // the file's write lock
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock); }),
            ErrorCode::RETRIES_EXHAUSTED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  other.exec("ROLLBACK");

  const auto errors = events->of(LockEventKind::STORE_ERROR);
  ASSERT_EQ(errors.size(), 3U) << "one try and two retries";
  for (const auto& e : errors) {
    EXPECT_EQ(e.code, ErrorCode::RETRIES_EXHAUSTED) << e.message;
    EXPECT_EQ(e.clientId, "app");
  }
  EXPECT_EQ(m->metrics().storeErrors.at(ErrorCode::RETRIES_EXHAUSTED), 3U);
  m->tryAcquireLock(lock);  // free again
  EXPECT_EQ(events->count(LockEventKind::STORE_RECONNECTED), 0U);
  EXPECT_EQ(store->reconnections(), 0U);
}

}  // namespace
}  // namespace dlm::test
