// Takes and releases one lock on a SQLite file through the installed library.
#include <cstdio>
#include <string>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  try {
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
    const long long token = lock.fencingToken();
    const bool released = manager->releaseLock(lock);
    std::printf("dlm %s: fencing token %lld, released %d\n",
                std::string(dlm::version()).c_str(), token, released ? 1 : 0);
    return released ? 0 : 1;
  } catch (const dlm::DLMException& e) {
    // Caught by type across the library boundary: DLMException's typeinfo
    // is exported.
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
