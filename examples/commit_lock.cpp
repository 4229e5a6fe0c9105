// commit_lock: releasing a lock as part of the application's own transaction
// (commitLock): the release commits together with the application's write,
// or neither does, so the next holder never finds the lock free before the
// work it protected is committed.
//
//   commit_lock DATABASE_URL
//
//   DATABASE_URL  sqlite:PATH, postgresql://... or "" (see dlm/store_url.h).
//                 PostgreSQL: apply the schema first (dlmctl migrate).
//
// Invoice 42 is sent under the lock "invoice.42", twice:
//   1. the transaction rolls back: the row is not there and the lock is still
//      held; rollbackLock then frees it in dlm's own transaction;
//   2. the transaction commits: the row is there and the lock is free.
// Exits 0 when both held.
#include <dlm/dlm.h>
#include <dlm/store_url.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>

#include "app_db.h"

using namespace std::chrono_literals;

namespace {

bool check(bool ok, const char* what) {
  std::printf("  %s %s\n", ok ? "ok:    " : "FAILED:", what);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "";
  try {
    auto manager =
        dlm::DistributedLockManager::builder()
            .clientId("billing")
            .farmId("example")
            .store(dlm::openStore(url))
            .build();
    manager->initialize();

    AppDb db(url);  // the application's own connection to the same database
    db.begin();
    db.exec(
        "CREATE TABLE IF NOT EXISTS sent_invoices (id integer PRIMARY KEY, "
        "fence bigint NOT NULL)");
    db.exec("DELETE FROM sent_invoices WHERE id = 42");  // from an earlier run
    db.commit();

    dlm::Lock lock = manager->getLockInstance("invoice.42", dlm::LockLevel::DC);
    const auto sent = [&] {
      db.begin();
      const long long rows =
          db.queryInt("SELECT count(*) FROM sent_invoices WHERE id = 42");
      db.commit();
      return rows == 1;
    };
    const auto held = [&] { return manager->describeLock(lock).has_value(); };
    bool ok = true;

    std::printf("1. send invoice 42, then the transaction rolls back\n");
    manager->acquireLock(lock, 30s);
    db.begin();
    db.exec("INSERT INTO sent_invoices VALUES (42, $1)", {lock.fencingToken()});
    // The release joins the transaction; then a later statement fails, say.
    manager->commitLock(lock, db.transaction());
    db.rollback();
    ok &= check(!sent(), "invoice 42 is not recorded as sent");
    ok &= check(held(), "invoice.42 is still locked: nobody else sends it");
    ok &= check(manager->rollbackLock(lock), "rollbackLock freed it");
    ok &= check(!held(), "invoice.42 is free");

    std::printf("2. send invoice 42, and the transaction commits\n");
    manager->acquireLock(lock, 30s);
    db.begin();
    db.exec("INSERT INTO sent_invoices VALUES (42, $1)", {lock.fencingToken()});
    manager->commitLock(lock, db.transaction());
    db.commit();  // the row and the release, together
    ok &= check(sent(), "invoice 42 is recorded as sent");
    ok &= check(!held(), "invoice.42 is free");

    std::printf(ok ? "OK\n" : "FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commit_lock: %s\n", e.what());
    return 1;
  }
}
