// Strict tenancy (schema 16 on): with first-use binding switched off, a
// clientId nobody bound cannot be squatted. Until schema 15 the first login
// to use a name owned it (the neighbour took `payments` first).
#include <fmt/format.h>

#include <string>

#include "security/neighbour_fixture.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

using StrictTenancy = Neighbours;

TEST_F(StrictTenancy, WithFirstUseOffAnUnboundClientIsRefusedUntilAnAdminBindsIt) {
  execSql(schema_.admin(),
          fmt::format("INSERT INTO {}.dlm_config (name, value) VALUES "
                      "('first_use_binding', 'off')",
                      schema_.admin().quote_name(schema_.name())));
  // The neighbour cannot take the name first, through the library ...
  auto squatter = managerAs(neighbour_.name(), "payments");
  Lock lock = squatter->getLockInstance("ledger", LockLevel::DC);
  try {
    squatter->tryAcquireLock(lock, std::chrono::seconds(60));
    ADD_FAILURE() << "an unbound client was bound by its first use";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::PERMISSION_DENIED);
    const std::string what = e.what();
    EXPECT_NE(what.find("dlmctl clients bind payments"), std::string::npos)
        << what;
  }
  // ... nor by calling the function itself, nor by queueing.
  EXPECT_EQ(stateOf(neighbour_.name(),
                    "SELECT acquired FROM dlm_try_acquire("
                    "ARRAY['DC#farm1#payments#x'], ARRAY[0::bigint], "
                    "'DC#farm1#payments#x.', 'DC#farm1#payments#x/', 'o', 't', "
                    "60000, 'h', 1, false)"),
            "42501");
  EXPECT_EQ(stateOf(neighbour_.name(),
                    "SELECT dlm_register_wait('DC#farm1#payments#x', '{}', "
                    "'DC#farm1#payments#x.', 'DC#farm1#payments#x/', 'o', "
                    "1000, false)"),
            "42501");
  const auto bound = execSql(
      schema_.admin(),
      fmt::format("SELECT count(*) FROM {}.dlm_clients WHERE client_id = "
                  "'payments'",
                  schema_.admin().quote_name(schema_.name())));
  EXPECT_EQ(bound[0][0].as<long long>(), 0) << "nobody owns the name";

  // The admin binds it to the service's login: the service works, the
  // neighbour still cannot.
  auto dba = sqlAs(dba_.name());
  execSql(*dba, fmt::format("SELECT dlm_bind_client('payments', '{}')",
                            orders_.name()));
  auto service = managerAs(orders_.name(), "payments");
  Lock mine = service->getLockInstance("ledger", LockLevel::DC);
  service->tryAcquireLock(mine, std::chrono::seconds(60));
  EXPECT_TRUE(mine.isAcquired());
  EXPECT_EQ(codeOf([&] { squatter->tryAcquireLock(lock); }),
            ErrorCode::PERMISSION_DENIED);
}

TEST_F(StrictTenancy, FirstUseStillBindsUnlessSwitchedOff) {
  auto first = managerAs(neighbour_.name(), "fresh");
  Lock lock = first->getLockInstance("x", LockLevel::DC);
  first->tryAcquireLock(lock, std::chrono::seconds(60));
  EXPECT_TRUE(lock.isAcquired());
}

}  // namespace
}  // namespace dlm::test
