#include "security/neighbour_fixture.h"

#include <fmt/format.h>

#include "support/test_stores.h"

namespace dlm::test {

Neighbours::Neighbours() = default;

Neighbours::~Neighbours() {
  for (const std::string& role : roles_) {
    try {
      execSql(schema_.admin(),
              "DROP OWNED BY " + schema_.admin().quote_name(role));
      execSql(schema_.admin(), "DROP ROLE " + schema_.admin().quote_name(role));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "dropping role " << role << ": " << e.what();
    }
  }
}

std::shared_ptr<PostgresStore> Neighbours::storeAs(const std::string& login) {
  PostgresStoreOptions options = schema_.options(fmt::format("user={}", login));
  // These tests judge what the server allows, not how fast it answers: a
  // generous budget, so that a busy machine cannot turn an answer into a
  // timeout (support/test_stores.h, kTestStoreBudget).
  options.operationTimeout = kTestStoreBudget;
  auto store = std::make_shared<PostgresStore>(options);
  store->initialize(false);
  return store;
}

std::unique_ptr<DistributedLockManager> Neighbours::managerAs(
    const std::string& login, const std::string& client, char separator,
    bool hierarchy) {
  LockConfiguration config;
  config.sleepBetweenRetries = std::chrono::milliseconds(200);
  auto m = DistributedLockManager::builder()
               .clientId(client)
               .farmId("farm1")
               .store(storeAs(login))
               .configuration(config)
               .separator(separator)
               .hierarchy(hierarchy)
               .build();
  m->initialize();
  return m;
}

std::unique_ptr<pqxx::connection> Neighbours::sqlAs(const std::string& login) {
  auto c = std::make_unique<pqxx::connection>(fmt::format("user={}", login));
  execSql(*c, "SET search_path = " + c->quote_name(schema_.name()));
  return c;
}

std::string Neighbours::stateOf(const std::string& login,
                                const std::string& sql) {
  auto c = sqlAs(login);
  return sqlStateOf([&] { execSql(*c, sql); });
}

std::string Neighbours::newRole(const std::string& what, bool login) {
  const std::string name = uniqueName("dlm_sec_" + what);
  execSql(schema_.admin(),
          fmt::format("CREATE ROLE {} {}", schema_.admin().quote_name(name),
                      login ? "LOGIN" : "NOLOGIN"));
  roles_.push_back(name);
  return name;
}

std::string sqlStateOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const pqxx::insufficient_privilege&) {
    return "42501";  // libpqxx 6.4 leaves this one's SQLSTATE out
  } catch (const pqxx::sql_error& e) {
    return e.sqlstate().empty() ? "?" : e.sqlstate();
  }
  return "";
}

}  // namespace dlm::test
