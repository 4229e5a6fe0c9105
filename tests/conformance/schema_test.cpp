// Schema versioning: initialize() refuses a database without dlm's schema
// and names what to apply; the builder's opt-in applies it.
#include "conformance/store_fixture.h"

namespace dlm::test {
namespace {

using Schema = StoreConformance;

TEST_P(Schema, InitializeOnAnEmptyDatabaseIsSchemaMismatchNamingTheMigration) {
  auto store = env().newEmptyStore();
  auto m = DistributedLockManager::builder()
               .clientId(client())
               .farmId("f")
               .store(store)
               .build();
  try {
    m->initialize();
    FAIL() << "initialize() accepted an empty database";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
    EXPECT_NE(std::string(e.what()).find("V1__"), std::string::npos)
        << e.what();
  }
  Lock lock = m->getLockInstance("x", LockLevel::DC);
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
