// Services and a neighbour on one database (docs/design.md, "Neighbours"):
// a migrated schema, two service logins (orders, billing), a neighbour
// login, each granted nothing but dlm_client, and a DBA login granted
// dlm_admin. The neighbour calls the SQL functions directly, as plain psql
// would.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <pqxx/pqxx>
#include <string>

#include "dlm/dlm.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_client_role_support.h"
#include "support/pg_test_support.h"

namespace dlm::test {

class Neighbours : public ::testing::Test {
 protected:
  Neighbours();

  // A store logged in as `login`, initialized.
  std::shared_ptr<PostgresStore> storeAs(const std::string& login);
  // A manager of `client` (farm "farm1") logged in as `login`.
  std::unique_ptr<DistributedLockManager> managerAs(const std::string& login,
                                                    const std::string& client,
                                                    char separator = '.',
                                                    bool hierarchy = true);
  // A plain connection as `login` with the schema on its search_path.
  std::unique_ptr<pqxx::connection> sqlAs(const std::string& login);
  // Runs `sql` in autocommit as `login`: "" when it succeeds, else the
  // SQLSTATE it failed with.
  std::string stateOf(const std::string& login, const std::string& sql);

  // A LOGIN role with nothing, dropped at the end (group roles, second
  // logins of a service).
  std::string newRole(const std::string& what, bool login);

  // The scoped key of `id` for `client` in farm1.
  static std::string keyOf(const std::string& client, const std::string& id) {
    return "DC#farm1#" + client + "#" + id;
  }

  AdminMigratedSchema schema_;
  ClientRole orders_{schema_.admin()};
  ClientRole billing_{schema_.admin()};
  ClientRole neighbour_{schema_.admin()};
  AdminRole dba_{schema_.admin()};

 private:
  std::vector<std::string> roles_;

 public:
  ~Neighbours() override;
};

// The SQLSTATE `f` fails with ("" when it does not).
std::string sqlStateOf(const std::function<void()>& f);

}  // namespace dlm::test
