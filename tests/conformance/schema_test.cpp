// Schema versioning: a SQLite file gets its schema from initialize(); a
// PostgreSQL database without it is refused, naming the commands to run; the
// builder's opt-in applies it.
#include <string>

#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

using Schema = StoreConformance;

TEST_P(Schema, AnEmptySqliteFileGetsItsSchemaAPostgresDatabaseIsRefused) {
  auto store = env().newEmptyStore();
  auto m = DistributedLockManager::builder()
               .clientId(client())
               .farmId("f")
               .store(store)
               .build();
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  if (store->name() == "sqlite") {
    m->initialize();  // no migration step: the store's own file
    m->tryAcquireLock(lock);
    EXPECT_EQ(lock.fencingToken(), 1);
    return;
  }
  try {
    m->initialize();
    FAIL() << "initialize() accepted an empty database";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
    // What to do, as the DBA would: use the database's dlm schema when it
    // has one (the test database holds other tests' schemas), else create
    // one with psql and the schema file, or dlmctl
    // (tests/postgres/pg_schema_advice_test.cpp has each case).
    const std::string what = e.what();
    const bool useFound = what.find("found dlm schema") != std::string::npos;
    const bool create =
        what.find("psql -q -v ON_ERROR_STOP=1 -1") != std::string::npos &&
        what.find("schema/postgres.sql") != std::string::npos;
    EXPECT_TRUE(useFound != create) << what;
    EXPECT_NE(what.find("dlmctl"), std::string::npos) << what;
  }
  EXPECT_EQ(codeOf([&] { m->tryAcquireLock(lock); }),
            ErrorCode::INTERNAL_ERROR);
}

TEST_P(Schema, ApplyMigrationsOptInCreatesTheSchemaOnce) {
  auto store = env().newEmptyStore();
  auto m = DistributedLockManager::builder()
               .clientId(client())
               .farmId("f")
               .store(store)
               .applyMigrations(true)
               .build();
  m->initialize();
  m->initialize();  // already at the latest version: nothing to do
  Lock lock = m->getLockInstance("x", LockLevel::DC);
  m->tryAcquireLock(lock);
  EXPECT_EQ(lock.fencingToken(), 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, Schema, ::testing::ValuesIn(conformanceStores()),
                         storeParamName);

}  // namespace
}  // namespace dlm::test
