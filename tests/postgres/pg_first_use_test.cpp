// The first use of a client id binds it to the login's role (schema 7). Two
// processes that start together both try to bind it; the second waits for
// the first's transaction. That wait is not a busy key: it must not be
// answered "held by someone else" after rowLockWait (schema 10).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "postgres/pg_client_role_support.h"
#include "support/joining_thread.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

TEST(PgFirstUse, AnAcquireWaitsForAConcurrentFirstUseOfItsClient) {
  ClientStores stores;
  auto store = stores.newStore();
  // Another session binds the client and keeps its transaction open for
  // 400 ms: eight times the store's rowLockWait (50 ms).
  pqxx::connection& admin = stores.admin();
  pqxx::work binding(admin);
  binding.exec_params(
      "SELECT " + admin.quote_name(stores.schema().name()) +
          ".dlm_bind_client($1, $2)",
      "firstuse", stores.role());
  JoiningThread committer([&] {
    std::this_thread::sleep_for(400ms);
    binding.commit();
  });
  const auto start = steady_clock::now();
  const AcquireResult r =
      acquireAs(*store, pathKey("DC#f#firstuse#", "job"), "o", "t1");
  const auto took = steady_clock::now() - start;
  committer.join();
  EXPECT_TRUE(r.acquired) << "answered blocked by '" << r.blockedBy
                          << "' for a key nobody holds";
  EXPECT_GE(took, 300ms) << "it did not wait for the other first use";
}

}  // namespace
}  // namespace dlm::test
