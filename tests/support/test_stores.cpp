#include "support/test_stores.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "cli/temp_dir.h"
#include "random_id.h"

#ifdef DLM_WITH_POSTGRES
#include <pqxx/pqxx>

#include "dlm/postgres_store.h"
#endif
#ifdef DLM_WITH_SQLITE
#include "dlm/sqlite_store.h"
#endif

namespace dlm::test {
namespace {

std::string uniqueSuffix() {
  std::string id = internal::randomUuid().substr(0, 8);
  return fmt::format("{}_{}", getpid(), id);
}

#ifdef DLM_WITH_SQLITE
class SqliteEnvironment final : public StoreEnvironment {
 public:
  SqliteEnvironment() : dir_("dlm-test"), path_(dir_.file("locks.sqlite")) {
    newStore();  // applies the schema once
  }

  std::string name() const override { return "sqlite"; }
  std::shared_ptr<LockStore> newStore() override {
    auto store = std::make_shared<SqliteStore>(SqliteStoreOptions{path_});
    store->initialize(/*applyMigrations=*/true);
    return store;
  }
  std::shared_ptr<LockStore> newEmptyStore() override {
    const std::string path =
        dir_.file(fmt::format("empty-{}.sqlite", uniqueSuffix()));
    return std::make_shared<SqliteStore>(SqliteStoreOptions{path});
  }
  std::string url() const override { return "sqlite:" + path_; }
  std::string postgresSchema() const override { return ""; }

 private:
  cli::TempDir dir_;
  std::string path_;
};
#endif

#ifdef DLM_WITH_POSTGRES
// The login role the tests run as: it gets only the dlm_client role the
// schema creates, so a privilege the library needs but the schema does not
// grant fails the suite.
constexpr const char* kAppRole = "dlm_test_app";

class PostgresEnvironment final : public StoreEnvironment {
 public:
  PostgresEnvironment() : admin_("") {  // PG* variables name the server
    schema_ = "dlm_test_" + uniqueSuffix();
    exec(fmt::format("CREATE SCHEMA {}", admin_.quote_name(schema_)));
    PostgresStoreOptions options;
    options.schema = schema_;
    PostgresStore(options).initialize(/*applyMigrations=*/true);
    ensureAppRole();
  }
  ~PostgresEnvironment() override {
    try {
      for (const auto& s : emptySchemas_) {
        exec(fmt::format("DROP SCHEMA IF EXISTS {} CASCADE",
                         admin_.quote_name(s)));
      }
      exec(fmt::format("DROP SCHEMA IF EXISTS {} CASCADE",
                       admin_.quote_name(schema_)));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dropping test schema %s: %s\n", schema_.c_str(),
                   e.what());
    }
  }

  std::string name() const override { return "postgres"; }
  std::shared_ptr<LockStore> newStore() override {
    PostgresStoreOptions options;
    options.connection = fmt::format("user={}", kAppRole);
    options.schema = schema_;
    auto store = std::make_shared<PostgresStore>(options);
    store->initialize(/*applyMigrations=*/false);
    return store;
  }
  std::shared_ptr<LockStore> newEmptyStore() override {
    const std::string empty = "dlm_empty_" + uniqueSuffix();
    exec(fmt::format("CREATE SCHEMA {}", admin_.quote_name(empty)));
    emptySchemas_.push_back(empty);
    PostgresStoreOptions options;
    options.schema = empty;
    return std::make_shared<PostgresStore>(options);
  }
  // libpq fills what the URI leaves out (host, port, database) from PG*.
  std::string url() const override {
    return fmt::format("postgresql://{}@", kAppRole);
  }
  std::string postgresSchema() const override { return schema_; }

 private:
  void exec(const std::string& sql) {
    pqxx::nontransaction tx(admin_);
    tx.exec(sql);
  }

  // Roles are cluster-wide and test processes run side by side: create the
  // role if missing and tolerate losing the race to another process.
  void ensureAppRole() {
    for (int attempt = 0;; ++attempt) {
      try {
        exec(fmt::format(
            "DO $$ BEGIN "
            "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{0}') "
            "THEN CREATE ROLE {0} LOGIN; END IF; END $$",
            kAppRole));
        exec(fmt::format("GRANT dlm_client TO {}", kAppRole));
        return;
      } catch (const pqxx::sql_error&) {
        if (attempt >= 5) throw;
      }
    }
  }

  pqxx::connection admin_;
  std::string schema_;
  std::vector<std::string> emptySchemas_;
};
#endif

}  // namespace

std::unique_ptr<StoreEnvironment> makeSqliteEnvironment() {
#ifdef DLM_WITH_SQLITE
  return std::make_unique<SqliteEnvironment>();
#else
  throw std::runtime_error("built without the SQLite store");
#endif
}

std::unique_ptr<StoreEnvironment> makePostgresEnvironment() {
#ifdef DLM_WITH_POSTGRES
  try {
    return std::make_unique<PostgresEnvironment>();
  } catch (const pqxx::broken_connection& e) {
    throw std::runtime_error(
        fmt::format("PostgreSQL tests need a server named by PG* variables "
                    "(scripts/test.sh starts one): {}",
                    e.what()));
  }
#else
  throw std::runtime_error("built without the PostgreSQL store");
#endif
}

std::unique_ptr<StoreEnvironment> makeEnvironment(const std::string& name) {
  if (name == "sqlite") return makeSqliteEnvironment();
  if (name == "postgres") return makePostgresEnvironment();
  throw std::invalid_argument("unknown store " + name);
}

std::vector<std::string> compiledStores() {
  std::vector<std::string> names;
#ifdef DLM_WITH_SQLITE
  names.push_back("sqlite");
#endif
#ifdef DLM_WITH_POSTGRES
  names.push_back("postgres");
#endif
  return names;
}

}  // namespace dlm::test
