// Store events on PostgreSQL: a backend terminated under a manager is
// replaced on the next call and reported as STORE_RECONNECTED; a server
// that cannot be reached gives one STORE_ERROR per failed try, without the
// password.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "dlm/dlm.h"
#include "dlm/postgres_store.h"
#include "support/error_code.h"
#include "support/pg_test_support.h"
#include "support/recorded_events.h"
#include "support/test_stores.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<DistributedLockManager> observed(
    std::shared_ptr<LockStore> store, std::shared_ptr<LockEventHandler> events,
    const std::string& client, bool initialize = true) {
  LockConfiguration config;
  config.storeRetries = 2;
  config.storeRetryBackoff = 10ms;
  config.operationTimeout = 2s;
  auto m = DistributedLockManager::builder()
               .clientId(client)
               .farmId("farm1")
               .store(std::move(store))
               .configuration(config)
               .events(std::move(events))
               .build();
  if (initialize) m->initialize();
  return m;
}

TEST(PostgresEvents, ATerminatedBackendIsReportedAsAReconnection) {
  auto env = makePostgresEnvironment();
  auto events = std::make_shared<RecordedEvents>();
  const std::string client = uniqueName("evt");
  auto m = observed(env->newStore(), events, client);
  Lock lock = m->getLockInstance("r", LockLevel::DC);
  m->tryAcquireLock(lock);
  ASSERT_TRUE(m->releaseLock(lock));
  EXPECT_EQ(events->count(LockEventKind::STORE_RECONNECTED), 0U);

  // The environment's login role ("postgresql://ROLE@"): its connections
  // were opened before the manager announced its clientId.
  const std::string url = env->url();
  const auto at = url.find('@');
  ASSERT_NE(at, std::string::npos) << url;
  const std::string role = url.substr(13, at - 13);
  auto admin = adminConnection();
  const auto terminated = execSql(
      *admin,
      fmt::format("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                  "WHERE usename = {}",
                  admin->quote(role)));
  ASSERT_GE(terminated.size(), 1U);

  m->tryAcquireLock(lock);  // on a new connection, at once
  ASSERT_TRUE(m->releaseLock(lock));
  const auto reconnected = events->of(LockEventKind::STORE_RECONNECTED);
  ASSERT_EQ(reconnected.size(), 1U);
  EXPECT_EQ(reconnected[0].code, ErrorCode::CONNECTION_ERROR);
  EXPECT_NE(reconnected[0].message.find("postgres store replaced"),
            std::string::npos)
      << reconnected[0].message;
  EXPECT_GE(m->metrics().storeReconnects, 1U);
  EXPECT_EQ(events->count(LockEventKind::STORE_ERROR), 0U)
      << "the dead idle connection was replaced without a failed call";
}

TEST(PostgresEvents, AnUnreachableServerGivesAStoreErrorPerTryWithoutPassword) {
  PostgresStoreOptions o;
  // Nothing listens on port 1.
  o.connection = "host=127.0.0.1 port=1 user=app password=secretpw";
  o.operationTimeout = 2s;
  auto events = std::make_shared<RecordedEvents>();
  auto m = observed(std::make_shared<PostgresStore>(o), events,
                    uniqueName("evt"), /*initialize=*/false);
  EXPECT_EQ(codeOf([&] { m->initialize(); }), ErrorCode::CONNECTION_ERROR);
  const auto errors = events->of(LockEventKind::STORE_ERROR);
  ASSERT_EQ(errors.size(), 3U) << "one try and two retries";
  for (const auto& e : errors) {
    EXPECT_EQ(e.code, ErrorCode::CONNECTION_ERROR);
    EXPECT_EQ(e.message.find("secretpw"), std::string::npos) << e.message;
    EXPECT_EQ(formatEvent(e).find("secretpw"), std::string::npos);
  }
  EXPECT_EQ(m->metrics().storeErrors.at(ErrorCode::CONNECTION_ERROR), 3U);
}

}  // namespace
}  // namespace dlm::test
