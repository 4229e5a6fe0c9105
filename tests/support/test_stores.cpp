#include "support/test_stores.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

#include "cli/temp_dir.h"
#include "random_id.h"

#ifdef DLM_WITH_POSTGRES
#include "dlm/postgres_store.h"
#include "support/pg_test_support.h"
#endif
#ifdef DLM_WITH_SQLITE
#include "dlm/sqlite_store.h"
#endif

namespace dlm::test {
namespace {

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
    const std::string path = dir_.file(uniqueName("empty") + ".sqlite");
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
// A fresh schema with dlm's migrations applied by the admin role, used
// through a login role that has only dlm_client: a privilege the library
// needs but the schema does not grant fails the suite.
class PostgresEnvironment final : public StoreEnvironment {
 public:
  PostgresEnvironment() : role_(migrated(schema_).admin()) {}

  std::string name() const override { return "postgres"; }
  std::shared_ptr<LockStore> newStore() override {
    auto store = std::make_shared<PostgresStore>(
        schema_.options(fmt::format("user={}", role_.name())));
    store->initialize(/*applyMigrations=*/false);
    return store;
  }
  std::shared_ptr<LockStore> newEmptyStore() override {
    empty_.push_back(std::make_unique<FreshSchema>());
    return std::make_shared<PostgresStore>(empty_.back()->options());
  }
  // libpq fills what the URI leaves out (host, port, database) from PG*.
  std::string url() const override {
    return fmt::format("postgresql://{}@", role_.name());
  }
  std::string postgresSchema() const override { return schema_.name(); }

 private:
  static FreshSchema& migrated(FreshSchema& schema) {
    PostgresStore(schema.options()).initialize(/*applyMigrations=*/true);
    return schema;
  }

  FreshSchema schema_;
  ClientRole role_;  // needs dlm_client, which the migration creates
  std::vector<std::unique_ptr<FreshSchema>> empty_;
};
#endif

}  // namespace

std::string uniqueName(const std::string& prefix) {
  return fmt::format("{}_{}_{}", prefix, getpid(),
                     internal::randomUuid().substr(0, 8));
}

std::unique_ptr<StoreEnvironment> makeSqliteEnvironment() {
#ifdef DLM_WITH_SQLITE
  return std::make_unique<SqliteEnvironment>();
#else
  throw std::runtime_error("built without the SQLite store");
#endif
}

std::unique_ptr<StoreEnvironment> makePostgresEnvironment() {
#ifdef DLM_WITH_POSTGRES
  // Throws when the server named by PG* cannot be reached (adminConnection).
  return std::make_unique<PostgresEnvironment>();
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
