// PostgreSQL and PgBouncer: a store call made after the server ended the
// store's backend (pg_terminate_backend, as a failover or an operator does)
// is answered on a new connection or fails as a lost connection
// (CONNECTION_ERROR / RETRIES_EXHAUSTED, transient), which the manager
// resolves by token; never as an INTERNAL_ERROR, which the manager neither
// retries nor resolves.
#include <string>

#include "store_contract/store_contract_fixture.h"

#ifdef DLM_WITH_POSTGRES
#include "support/pg_test_support.h"
#endif

namespace dlm::test {
namespace {

#ifdef DLM_WITH_POSTGRES

using ConnectionLoss = StoreContract;

std::vector<std::string> connectionLossStores() {
  std::vector<std::string> names;
  for (const auto& n : contractStores()) {
    if (n == "postgres" || n == "pgbouncer") names.push_back(n);
  }
  return names;
}

TEST_P(ConnectionLoss, ACallAfterItsBackendWasTerminatedIsAnsweredOrTransient) {
  freshDatabase();  // its own login role: only this test's backends end
  const std::string role = clientRole();
  ASSERT_FALSE(role.empty());
  auto admin = adminConnection();
  for (int round = 0; round < 5; ++round) {
    const std::string token = "t" + std::to_string(round);
    ASSERT_TRUE(acquire("k", "A", token).acquired) << round;
    ASSERT_TRUE(release("k", token)) << round;
    {
      pqxx::nontransaction q(*admin);
      ASSERT_GT(q.exec_params("SELECT count(*) FILTER (WHERE "
                              "pg_terminate_backend(pid)) FROM "
                              "pg_stat_activity WHERE usename = $1",
                              role)[0][0]
                    .as<long>(),
                0)
          << round;
    }
    const std::string next = "u" + std::to_string(round);
    try {
      const AcquireResult r = acquire("k", "A", next);
      EXPECT_TRUE(r.acquired) << round;
    } catch (const DLMException& e) {
      EXPECT_TRUE(e.transient()) << round << ": " << toString(e.code())
                                 << ": " << e.what();
      EXPECT_TRUE(e.code() == ErrorCode::CONNECTION_ERROR ||
                  e.code() == ErrorCode::RETRIES_EXHAUSTED)
          << round << ": " << toString(e.code()) << ": " << e.what();
    }
    // Whatever the answer, the next call works and the key can be freed.
    const AcquireResult again = acquire("k", "A", next);
    ASSERT_TRUE(again.acquired) << round;
    ASSERT_TRUE(release("k", next)) << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, ConnectionLoss,
                         ::testing::ValuesIn(connectionLossStores()),
                         contractParamName);
#endif

}  // namespace
}  // namespace dlm::test
