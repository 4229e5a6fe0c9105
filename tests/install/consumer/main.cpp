// Takes and releases one lock on a SQLite file through the installed library.
#include <cstdio>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto store =
      std::make_shared<dlm::SqliteStore>(dlm::SqliteStoreOptions{argv[1]});
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId("consumer")
                     .farmId("farm")
                     .store(store)
                     .applyMigrations(true)
                     .build();
  manager->initialize();
  dlm::Lock lock =
      manager->getLockInstance("install.check", dlm::LockLevel::DC);
  manager->tryAcquireLock(lock);
  const bool released = manager->releaseLock(lock);
  std::printf("fencing token %lld, released %d\n",
              static_cast<long long>(lock.fencingToken()), released ? 1 : 0);
  return released ? 0 : 1;
}
