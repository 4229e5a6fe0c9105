// guarded_workers: workers that change per-entity rows of the application's
// own table under the entity's lock, with writes the database itself refuses
// unless the lock is still held (guardWithin), and the lock's fencing token
// carried into the row.
//
//   guarded_workers DATABASE_URL [THREADS] [ROUNDS]
//
//   DATABASE_URL  sqlite:PATH, postgresql://... or "" (see dlm/store_url.h).
//                 PostgreSQL: apply the schema first (dlmctl migrate).
//
// It creates the table accounts(id, balance, fence). THREADS threads (4)
// each make ROUNDS deposits (10) to the accounts 1..3 in turn: take the
// account's lock "account.<id>", read the balance, do some work elsewhere,
// then write balance + 1 and the lock's fencing token in a transaction of the
// application's own that guardWithin makes depend on the lock (it cannot
// commit if the lock was lost meanwhile). Without the lock, workers would
// read the same balance and overwrite each other's deposits. At the end it
// checks that every deposit is there and that no write ever met a fence as
// new as its own token (the fence column only grew). Last, a holder paused
// past its lease tries to write after another worker took its lock: the
// guard makes the database refuse it. Exits 0 when all three held.
#include <dlm/dlm.h>
#include <dlm/store_url.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "app_db.h"

using namespace std::chrono_literals;

namespace {

constexpr int kAccounts = 3;

std::atomic<int> staleFences{0};  // writes that found a newer fence
std::atomic<int> failures{0};     // workers that stopped on an error

// One worker: `rounds` deposits, each under the account's lock.
void deposit(dlm::DistributedLockManager& manager, const std::string& url,
             int worker, int rounds) {
  try {
    AppDb db(url);  // the application's own connection, one per thread
    for (int round = 0; round < rounds; ++round) {
      const long long account = 1 + (worker + round) % kAccounts;
      dlm::Lock lock = manager.getLockInstance(
          "account." + std::to_string(account), dlm::LockLevel::DC);
      manager.acquireLock(lock, 10s, 30s);  // a 10 s lease; wait up to 30 s

      // Read, work outside the database, write: two transactions, so only
      // the lock keeps two workers from both reading the old balance.
      db.begin();
      const long long balance =
          db.queryInt("SELECT balance FROM accounts WHERE id = $1", {account});
      db.commit();
      std::this_thread::sleep_for(2ms);  // e.g. a call to another service

      db.begin();
      // Throws LOCK_NOT_HELD (and the transaction cannot commit) if the lock
      // expired and someone else took it; holds takeovers off until commit.
      manager.guardWithin(lock, db.transaction());
      const long long written = db.exec(
          "UPDATE accounts SET balance = $1, fence = $2"
          " WHERE id = $3 AND fence < $2",
          {balance + 1, lock.fencingToken(), account});
      // 0 rows: a newer holder had written (never here).
      if (written != 1) ++staleFences;
      db.commit();

      // After the commit: a release waits for the guarded transaction.
      manager.releaseLock(lock);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %d: %s\n", worker, e.what());
    ++failures;
  }
}

// A holder paused past its lease (GC, swap, a stopped VM) while another
// worker took the lock over: the database must refuse its write.
bool pausedHolderIsRefused(dlm::DistributedLockManager& manager,
                           const std::string& url) {
  dlm::Lock paused = manager.getLockInstance("account.1", dlm::LockLevel::DC);
  manager.acquireLock(paused, 200ms);  // a 200 ms lease, then it "pauses"
  std::thread another([&manager] {  // another worker: waits for the lease end
    dlm::Lock other = manager.getLockInstance("account.1", dlm::LockLevel::DC);
    manager.acquireLock(other, 10s, 10s);
    manager.releaseLock(other);
  });
  another.join();
  AppDb db(url);
  db.begin();
  try {
    manager.guardWithin(paused, db.transaction());
    db.exec("UPDATE accounts SET balance = balance + 1000 WHERE id = 1");
    db.commit();
    return false;  // the paused holder's write landed
  } catch (const dlm::DLMException& e) {
    if (e.code() != dlm::ErrorCode::LOCK_NOT_HELD) throw;
    db.rollback();
    return !manager.releaseLock(paused);  // false: it was not ours any more
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "";
  const int threads = argc > 2 ? std::atoi(argv[2]) : 4;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10;
  try {
    auto manager =
        dlm::DistributedLockManager::builder()
            .clientId("bank")
            .farmId("example")
            .store(dlm::openStore(url))
            .build();
    manager->initialize();

    AppDb db(url);
    db.begin();
    db.exec(
        "CREATE TABLE IF NOT EXISTS accounts (id integer PRIMARY KEY, "
        "balance bigint NOT NULL, fence bigint NOT NULL)");
    for (long long id = 1; id <= kAccounts; ++id) {
      db.exec(
          "INSERT INTO accounts VALUES ($1, 0, 0) ON CONFLICT (id) DO NOTHING",
          {id});
    }
    const long long before = db.queryInt("SELECT sum(balance) FROM accounts");
    db.commit();
    std::printf("%d workers make %d deposits each to %d accounts\n", threads,
                rounds, kAccounts);

    std::vector<std::thread> workers;
    for (int w = 0; w < threads; ++w) {
      workers.emplace_back(deposit, std::ref(*manager), std::cref(url), w,
                           rounds);
    }
    for (auto& t : workers) t.join();
    const bool refused = pausedHolderIsRefused(*manager, url);
    std::printf("a holder paused past its lease: write %s\n",
                refused ? "refused (LOCK_NOT_HELD)" : "ACCEPTED");

    db.begin();
    const long long added =
        db.queryInt("SELECT sum(balance) FROM accounts") - before;
    const long long maxFence = db.queryInt("SELECT max(fence) FROM accounts");
    db.commit();
    const long long expected = static_cast<long long>(threads) * rounds;
    std::printf(
        "deposits found: %lld of %lld; highest fencing token written: %lld\n",
        added, expected, maxFence);
    std::printf("writes that met a newer fence: %d\n", staleFences.load());
    if (failures > 0 || added != expected || staleFences > 0 || !refused) {
      std::printf("FAILED\n");
      return 1;
    }
    std::printf(
        "OK: no deposit lost, fences only grew, paused holder refused\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "guarded_workers: %s\n", e.what());
    return 1;
  }
}
