// No login can store an owner, token or holder host larger than dlm_limits
// allows (schema 15 on). Until schema 14 a 100 MB token and a 32 MB host
// were accepted, and the operator's `dlmctl list` then ran for minutes.
#include <fmt/format.h>

#include <string>

#include "security/neighbour_fixture.h"

namespace dlm::test {
namespace {

using StringLimits = Neighbours;

// dlm_try_acquire of the neighbour's own key with the given SQL expressions
// for owner, token and host.
std::string acquireSql(const std::string& owner, const std::string& token,
                       const std::string& host) {
  const std::string key = "DC#farm1#nb#k";
  return fmt::format(
      "SELECT acquired FROM dlm_try_acquire(ARRAY['{0}'], ARRAY[0::bigint], "
      "'{0}.', '{0}/', {1}, {2}, 60000, {3}, 1, false)",
      key, owner, token, host);
}

TEST_F(StringLimits, AHugeHostTokenOrOwnerIsRefusedBeforeAnythingIsWritten) {
  const std::string who = neighbour_.name();
  // A first, ordinary hold binds the client and makes the key's row, so
  // the calls below take the fast path of an existing row.
  EXPECT_EQ(stateOf(who, acquireSql("'o'", "'t1'", "'h'")), "");
  EXPECT_EQ(stateOf(who, "SELECT dlm_release('DC#farm1#nb#k', 't1', '{}', "
                         "'DC#farm1#nb#k.', 'DC#farm1#nb#k/')"),
            "");
  EXPECT_EQ(stateOf(who, acquireSql("'o'", "'t2'", "repeat('h', 33554432)")),
            "22023")
      << "a 32 MB holder host";
  EXPECT_EQ(stateOf(who, acquireSql("'o'", "repeat('t', 104857600)", "'h'")),
            "22023")
      << "a 100 MB token";
  EXPECT_EQ(stateOf(who, acquireSql("repeat('o', 129)", "'t3'", "'h'")),
            "22023")
      << "an owner over 128 bytes";
  EXPECT_EQ(stateOf(who, acquireSql("'o'", "'t4'", "repeat('h', 256)")),
            "22023")
      << "a host over 255 bytes";
  EXPECT_EQ(stateOf(who,
                    "SELECT dlm_register_wait('DC#farm1#nb#k', '{}', "
                    "'DC#farm1#nb#k.', 'DC#farm1#nb#k/', repeat('o', 129), "
                    "1000, false)"),
            "22023")
      << "a wait's owner over 128 bytes";
  const auto rows = execSql(
      schema_.admin(),
      fmt::format("SELECT count(*) FROM {}.dlm_locks WHERE resource = "
                  "'DC#farm1#nb#k' AND (status = 'HELD' OR "
                  "octet_length(coalesce(holder_host, '')) > 255)",
                  schema_.admin().quote_name(schema_.name())));
  EXPECT_EQ(rows[0][0].as<long long>(), 0) << "nothing was written";
  // At the limits, accepted.
  EXPECT_EQ(stateOf(who, acquireSql("repeat('o', 128)", "repeat('t', 128)",
                                    "repeat('h', 255)")),
            "");
}

TEST_F(StringLimits, TheDbaCanLowerTheLimits) {
  execSql(schema_.admin(),
          fmt::format("UPDATE {}.dlm_limits SET max_host_bytes = 8",
                      schema_.admin().quote_name(schema_.name())));
  EXPECT_EQ(stateOf(neighbour_.name(), acquireSql("'o'", "'t'", "'web-host-1'")),
            "22023");
  EXPECT_EQ(stateOf(neighbour_.name(), acquireSql("'o'", "'t'", "'web-1'")), "");
}

}  // namespace
}  // namespace dlm::test
