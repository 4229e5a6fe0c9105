// The proxy itself, so that a stalled-server failure is the library's and
// not the proxy's: it forwards a PostgreSQL session, forwards nothing while
// stalled (the session waits, not fails), resumes, and cutAll ends it.
#include "faults/tcp_proxy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <pqxx/pqxx>

#include "faults/bounded_call.h"
#include "faults/proxied_server.h"

namespace dlm::test::faults {
namespace {

using namespace std::chrono_literals;

int selectOne(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  return tx.exec("SELECT 1")[0][0].as<int>();
}

TEST(TcpProxy, ForwardsStopsWhileStalledResumesAndCutsEveryConnection) {
  auto proxy = proxyToServer();
  pqxx::connection conn(proxy->conninfo());
  EXPECT_EQ(selectOne(conn), 1);
  EXPECT_EQ(proxy->accepted(), 1);

  proxy->stall();
  // The query cannot be answered while stalled: it is still waiting after
  // 300 ms, and resuming lets it finish normally.
  const auto stalled = boundedCall([&] { EXPECT_EQ(selectOne(conn), 1); },
                                   300ms, [&] { proxy->resume(); });
  EXPECT_TRUE(stalled.unblocked) << "answered in " << stalled.ms << " ms";
  EXPECT_EQ(stalled.outcome, "OK") << stalled.message;
  EXPECT_GE(stalled.ms, 250);  // the thread may start a little late

  proxy->cutAll();
  EXPECT_THROW(selectOne(conn), pqxx::broken_connection);
  // The listener stays: a new session works.
  pqxx::connection again(proxy->conninfo());
  EXPECT_EQ(selectOne(again), 1);
}

}  // namespace
}  // namespace dlm::test::faults
