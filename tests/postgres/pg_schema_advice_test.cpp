// When a store does not see dlm's tables, its advice must be safe to
// follow literally: it names the dlm schemas the database has (a second
// one would be a second, independent set of locks), and suggests creating
// one only in a database that has none, never "public" by default. Until
// 1.0 it said "CREATE SCHEMA IF NOT EXISTS public ... SET search_path =
// public" to a superuser whose services used schema "locks", and
// "CREATE SCHEMA lock" to a mistyped --schema lock.
#include <gtest/gtest.h>

#include <string>

#include "dlm/postgres_store.h"
#include "postgres/pg_migrate.h"
#include "postgres/schema_locator.h"
#include "support/error_code.h"
#include "support/pg_test_support.h"

namespace dlm::test {
namespace {

bool adviceSays(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An empty database of its own (other tests' dlm schemas live in the
// shared one), dropped at the end.
class EmptyDatabase {
 public:
  EmptyDatabase() : admin_(adminConnection()), name_(uniqueName("dlm_advice")) {
    execSql(*admin_, "CREATE DATABASE " + admin_->quote_name(name_));
  }
  ~EmptyDatabase() {
    try {
      execSql(*admin_, "DROP DATABASE IF EXISTS " +
                           admin_->quote_name(name_) + " WITH (FORCE)");
    } catch (const std::exception&) {
      // Left behind rather than crash the run.
    }
  }
  PostgresStoreOptions options(const std::string& schema = "") const {
    PostgresStoreOptions o;
    o.connection = "dbname=" + name_;
    o.schema = schema;
    return o;
  }
  // Runs `sql` in this database as the superuser.
  void exec(const std::string& sql) {
    auto c = adminConnection("dbname=" + name_);
    execSql(*c, sql);
  }
  const std::string& name() const { return name_; }

 private:
  std::unique_ptr<pqxx::connection> admin_;
  std::string name_;
};

// A database whose dlm schema is "locks" (as docs/dba.md makes it).
class LocksDatabase : public EmptyDatabase {
 public:
  LocksDatabase() {
    exec("CREATE SCHEMA locks");
    internal::applyPostgresMigrations(options("locks"));
  }
};

std::string initializeError(const PostgresStoreOptions& options) {
  PostgresStore store(options);
  const DLMException e = errorOf([&] { store.initialize(false); });
  EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
  return e.what();
}

TEST(SchemaAdvice, WithoutSchemaOptionTheDatabasesDlmSchemaIsNamedNotCreated) {
  LocksDatabase db;
  const std::string message = initializeError(db.options());
  EXPECT_TRUE(adviceSays(message, "found dlm schema \"locks\"")) << message;
  EXPECT_TRUE(adviceSays(message, "--schema locks")) << message;
  EXPECT_FALSE(adviceSays(message, "CREATE SCHEMA")) << message;
  EXPECT_FALSE(adviceSays(message, "public")) << message;
  // The advice followed literally works.
  PostgresStore store(db.options("locks"));
  EXPECT_NO_THROW(store.initialize(false));
}

TEST(SchemaAdvice, AMistypedSchemaNamesTheOneThatExists) {
  LocksDatabase db;
  const std::string message = initializeError(db.options("lock"));
  EXPECT_TRUE(adviceSays(message, "found dlm schema \"locks\"")) << message;
  EXPECT_FALSE(adviceSays(message, "CREATE SCHEMA")) << message;
  // dlmctl --schema lock migrate: refused the same way, nothing created.
  const DLMException e = errorOf(
      [&] { internal::applyPostgresMigrations(db.options("lock")); });
  EXPECT_EQ(e.code(), ErrorCode::TABLE_CREATION_ERROR) << e.what();
  EXPECT_TRUE(adviceSays(e.what(), "found dlm schema \"locks\"")) << e.what();
  EXPECT_FALSE(adviceSays(e.what(), "CREATE SCHEMA")) << e.what();
}

TEST(SchemaAdvice, AnExistingSchemaWithoutDlmNamesTheOneThatHasIt) {
  LocksDatabase db;
  db.exec("CREATE SCHEMA app");
  const std::string message = initializeError(db.options("app"));
  EXPECT_TRUE(adviceSays(message, "schema \"app\" has none")) << message;
  EXPECT_TRUE(adviceSays(message, "found dlm schema \"locks\"")) << message;
  EXPECT_FALSE(adviceSays(message, "CREATE SCHEMA")) << message;
}

TEST(SchemaAdvice, ADatabaseWithoutAnyIsToldHowToCreateOneNotInPublic) {
  EmptyDatabase db;
  const std::string message = initializeError(db.options());
  EXPECT_TRUE(adviceSays(message, "has no dlm schema at all")) << message;
  EXPECT_TRUE(adviceSays(message, "psql -q -v ON_ERROR_STOP=1 -1 -d " + db.name()))
      << message;
  EXPECT_TRUE(adviceSays(message, "-c 'CREATE SCHEMA dlm' -c 'SET search_path = dlm'"))
      << message;
  EXPECT_TRUE(adviceSays(message, "/usr/share/dlm/schema/postgres.sql"))
      << message;
  EXPECT_TRUE(adviceSays(message, "--schema dlm migrate")) << message;
  EXPECT_FALSE(adviceSays(message, "public")) << message;
  // A schema asked for by name is the one to create.
  const std::string named = initializeError(db.options("Orders Locks"));
  EXPECT_TRUE(adviceSays(named, "CREATE SCHEMA \"Orders Locks\"")) << named;
}

TEST(SchemaAdvice, SeveralDlmSchemasAreAllNamed) {
  LocksDatabase db;
  db.exec("CREATE SCHEMA billing_locks");
  internal::applyPostgresMigrations(db.options("billing_locks"));
  const std::string message = initializeError(db.options());
  EXPECT_TRUE(adviceSays(message, "\"billing_locks\" and \"locks\"")) << message;
  EXPECT_FALSE(adviceSays(message, "CREATE SCHEMA")) << message;
}

}  // namespace
}  // namespace dlm::test
