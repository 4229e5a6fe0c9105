// libpq_transaction: guarded writes and commitLock for an application that
// talks to PostgreSQL through plain libpq, without libpqxx: its transaction
// is a PGconn* on which it sent BEGIN, handed to dlm as
// dlm::LibpqTransaction. Built with `pkg-config --cflags --libs dlm libpq`
// alone: no libpqxx header or library.
//
//   libpq_transaction DATABASE_URL
//
//   DATABASE_URL  postgresql://... or "" (libpq's PG* variables; see
//                 dlm/store_url.h). PostgreSQL only; apply the schema first
//                 (dlmctl migrate). The application's own connection goes
//                 to the same database.
//
// Parcel 7 is shipped under the lock "parcel.7", three times:
//   1. a guarded write (guardWithin, INSERT, COMMIT): it commits, and the
//      lock is still held;
//   2. the holder pauses past its lease and another instance takes the lock
//      over: the guard throws LOCK_NOT_HELD, the INSERT that follows is
//      refused and the COMMIT rolls back;
//   3. the write and the release in one transaction (commitLock): the lock
//      is free once the COMMIT is through.
// Exits 0 when all held, 1 otherwise, 2 for a URL that is not PostgreSQL.
#include <dlm/dlm.h>
#include <dlm/postgres_store.h>
#include <dlm/store_url.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

// The application's own libpq code: a connection and the results it reads,
// each freed by its owner.
struct Finish {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct Clear {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using Connection = std::unique_ptr<PGconn, Finish>;
using Result = std::unique_ptr<PGresult, Clear>;

// Runs `sql`; its result, whatever its status (the caller checks).
Result exec(PGconn* conn, const std::string& sql,
            const std::vector<const char*>& params = {}) {
  return Result(PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()),
                             nullptr, params.data(), nullptr, nullptr, 0));
}

// Runs `sql` and throws when it fails; its command status ("COMMIT", or
// "ROLLBACK" for the COMMIT of a transaction that failed).
std::string run(PGconn* conn, const std::string& sql,
                const std::vector<const char*>& params = {}) {
  const Result r = exec(conn, sql, params);
  const ExecStatusType status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    throw std::runtime_error(sql + ": " + PQerrorMessage(conn));
  }
  return PQcmdStatus(r.get());
}

// A manager of client "shipping" on the store at `url`, initialized.
std::unique_ptr<dlm::DistributedLockManager> shippingManager(
    const std::string& url) {
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId("shipping")
                     .farmId("example")
                     .store(dlm::openStore(url))
                     .build();
  manager->initialize();
  return manager;
}

bool check(bool ok, const char* what) {
  std::printf("  %s %s\n", ok ? "ok:    " : "FAILED:", what);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "";
  try {
    const dlm::ParsedStoreUrl where = dlm::parseStoreUrl(url);
    if (where.kind != dlm::StoreKind::POSTGRES) {
      std::fprintf(stderr, "libpq_transaction: needs a postgresql:// URL\n");
      return 2;
    }
    auto manager = shippingManager(url);
    auto otherInstance = shippingManager(url);  // another process, say

    // The application's own connection: "" reads the PG* variables.
    const Connection conn(PQconnectdb(where.location.c_str()));
    if (PQstatus(conn.get()) != CONNECTION_OK) {
      throw std::runtime_error(std::string("connect: ") +
                               PQerrorMessage(conn.get()));
    }
    PGconn* db = conn.get();
    run(db,
        "CREATE TABLE IF NOT EXISTS parcel_scans (parcel integer, "
        "fence bigint, note text)");
    run(db, "DELETE FROM parcel_scans WHERE parcel = 7");  // an earlier run's
    const auto scans = [&] {
      const Result r =
          exec(db, "SELECT count(*) FROM parcel_scans WHERE parcel = 7");
      return std::stoi(PQgetvalue(r.get(), 0, 0));
    };
    const auto scan = [&](const dlm::Lock& lock, const char* note) {
      const std::string fence = std::to_string(lock.fencingToken());
      return exec(db, "INSERT INTO parcel_scans VALUES (7, $1, $2)",
                  {fence.c_str(), note});
    };
    dlm::Lock lock = manager->getLockInstance("parcel.7");
    bool ok = true;

    std::printf("1. a guarded write\n");
    manager->acquireLock(lock, 30s);
    run(db, "BEGIN");
    manager->guardWithin(lock, dlm::LibpqTransaction(db));
    ok &= check(PQresultStatus(scan(lock, "guarded").get()) == PGRES_COMMAND_OK,
                "the INSERT went through");
    ok &= check(run(db, "COMMIT") == "COMMIT", "the transaction committed");
    ok &= check(scans() == 1, "one scan recorded");
    ok &= check(manager->describeLock(lock).has_value(),
                "parcel.7 is still locked: release it when done");
    manager->releaseLock(lock);

    std::printf("2. the lease ends and another instance takes over\n");
    manager->acquireLock(lock, 200ms);
    std::this_thread::sleep_for(300ms);  // a pause longer than the lease
    dlm::Lock theirs = otherInstance->getLockInstance("parcel.7");
    otherInstance->acquireLock(theirs, 30s, 10s);  // takes it over
    run(db, "BEGIN");
    try {
      manager->guardWithin(lock, dlm::LibpqTransaction(db));
      ok &= check(false, "guardWithin threw LOCK_NOT_HELD");
    } catch (const dlm::DLMException& e) {
      ok &= check(e.code() == dlm::ErrorCode::LOCK_NOT_HELD,
                  "guardWithin threw LOCK_NOT_HELD");
    }
    // A holder that writes anyway: the database refuses.
    ok &= check(PQresultStatus(scan(lock, "stale").get()) == PGRES_FATAL_ERROR,
                "the paused holder's INSERT is refused");
    ok &= check(run(db, "COMMIT") == "ROLLBACK",
                "its COMMIT rolled back (libpq's command status)");
    ok &= check(scans() == 1, "still one scan recorded");
    ok &= check(!manager->releaseLock(lock),
                "releaseLock: nothing to release, it was taken over");
    otherInstance->releaseLock(theirs);

    std::printf("3. the write and the release commit together\n");
    manager->acquireLock(lock, 30s);
    run(db, "BEGIN");
    ok &=
        check(PQresultStatus(scan(lock, "delivered").get()) == PGRES_COMMAND_OK,
              "the INSERT went through");
    manager->commitLock(lock, dlm::LibpqTransaction(db));
    ok &= check(manager->describeLock(lock).has_value(),
                "parcel.7 is held until the COMMIT");
    ok &= check(run(db, "COMMIT") == "COMMIT", "the transaction committed");
    ok &= check(scans() == 2, "two scans recorded");
    ok &= check(!manager->describeLock(lock).has_value(), "parcel.7 is free");

    std::printf(ok ? "OK\n" : "FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libpq_transaction: %s\n", e.what());
    return 1;
  }
}
