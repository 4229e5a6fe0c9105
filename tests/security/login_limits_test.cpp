// One login cannot grow the tables without bound by choosing owner strings
// (schema 17 on): live holds and live requests are limited per login
// (dlm_limits.max_holds_per_login, max_requests_per_login). Until schema
// 16 the only caps were per owner, which the caller chooses: 150 waits
// under 150 owners and 1,309 365-day holds a second were all accepted.
#include <fmt/format.h>

#include <string>

#include "security/neighbour_fixture.h"

namespace dlm::test {
namespace {

using LoginLimits = Neighbours;

std::string acquireSql(int i, const char* mode_shared) {
  const std::string key = fmt::format("DC#farm1#nb#k{}", i);
  return fmt::format(
      "SELECT acquired FROM dlm_try_acquire(ARRAY['{0}'], ARRAY[0::bigint], "
      "'{0}.', '{0}/', 'owner-{1}', 'token-{1}', 31536000000, 'h', 1, {2})",
      key, i, mode_shared);
}

std::string waitSql(int i) {
  const std::string key = fmt::format("DC#farm1#nb#w{}", i);
  return fmt::format(
      "SELECT dlm_register_wait('{0}', '{{}}', '{0}.', '{0}/', 'owner-{1}', "
      "60000, false)",
      key, i);
}

class LoginLimitsLowered : public LoginLimits {
 protected:
  LoginLimitsLowered() {
    execSql(schema_.admin(),
            fmt::format("UPDATE {}.dlm_limits SET max_holds_per_login = 3, "
                        "max_requests_per_login = 2",
                        schema_.admin().quote_name(schema_.name())));
  }
};

TEST_F(LoginLimitsLowered, HoldsBeyondTheLoginsLimitAreRefusedWhateverTheOwner) {
  const std::string who = neighbour_.name();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stateOf(who, acquireSql(i, "false")), "") << i;
  }
  // A fourth key under a fourth owner: a new row (first path) ...
  EXPECT_EQ(stateOf(who, acquireSql(3, "false")), "22023");
  // ... and a row that exists, free (the fast path of an existing row).
  execSql(schema_.admin(),
          fmt::format("INSERT INTO {}.dlm_locks (resource, resource_crc) "
                      "VALUES ('DC#farm1#nb#k4', 0)",
                      schema_.admin().quote_name(schema_.name())));
  EXPECT_EQ(stateOf(who, acquireSql(4, "false")), "22023");
  // A retry of a hold the login has is not a new one.
  EXPECT_EQ(stateOf(who, acquireSql(2, "false")), "");
  // SHARED holds are limited alike.
  for (int i = 10; i < 13; ++i) {
    EXPECT_EQ(stateOf(who, acquireSql(i, "true")), "") << i;
  }
  EXPECT_EQ(stateOf(who, acquireSql(13, "true")), "22023");
  // A release makes room.
  EXPECT_EQ(stateOf(who, "SELECT dlm_release('DC#farm1#nb#k0', 'token-0', "
                         "'{}', 'DC#farm1#nb#k0.', 'DC#farm1#nb#k0/')"),
            "");
  EXPECT_EQ(stateOf(who, acquireSql(3, "false")), "");
  // Another login of another client is not limited by this one's holds.
  auto billing = managerAs(billing_.name(), "billing");
  Lock lock = billing->getLockInstance("k", LockLevel::DC);
  EXPECT_NO_THROW(billing->tryAcquireLock(lock));
  const auto rows = execSql(
      schema_.admin(),
      fmt::format("SELECT count(*) FROM {}.dlm_locks WHERE status = 'HELD' "
                  "AND holder_login = '{}'",
                  schema_.admin().quote_name(schema_.name()), who));
  EXPECT_EQ(rows[0][0].as<long long>(), 3) << "holds recorded with the login";
}

TEST_F(LoginLimitsLowered, RequestsBeyondTheLoginsLimitAreRefusedWhateverTheOwner) {
  const std::string who = neighbour_.name();
  EXPECT_EQ(stateOf(who, waitSql(0)), "");
  EXPECT_EQ(stateOf(who, waitSql(1)), "");
  EXPECT_EQ(stateOf(who, waitSql(2)), "22023") << "a third owner's request";
  EXPECT_EQ(stateOf(who, waitSql(1)), "") << "a renewal is not a new request";
}

TEST_F(LoginLimits, TheLimitsRefuseWithAMessageNamingThem) {
  execSql(schema_.admin(),
          fmt::format("UPDATE {}.dlm_limits SET max_holds_per_login = 1",
                      schema_.admin().quote_name(schema_.name())));
  auto orders = managerAs(orders_.name(), "orders");
  Lock a = orders->getLockInstance("a", LockLevel::DC);
  Lock b = orders->getLockInstance("b", LockLevel::DC);
  orders->tryAcquireLock(a);
  try {
    orders->tryAcquireLock(b);
    FAIL() << "a second hold beyond max_holds_per_login = 1";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("max_holds_per_login"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(orders->releaseLock(a));
  EXPECT_NO_THROW(orders->tryAcquireLock(b));
}

}  // namespace
}  // namespace dlm::test
