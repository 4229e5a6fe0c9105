// PostgreSQL-specific behaviour of PostgresStore: error translation,
// privileges of the dlm_client role, the connection pool, and what only this
// store records (holder address, intention rows, byte-order prefixes).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/crc32.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/lock_store_admin.h"
#include "dlm/postgres_store.h"
#include "postgres/connection_pool.h"
#include "postgres/pg_migrate.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/pg_test_support.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

AcquireResult acquire(LockStore& store, const StoreKey& key,
                      const std::string& token,
                      std::chrono::milliseconds ttl = 10s,
                      const std::string& owner = "owner-1") {
  const Holder holder{"test-host", 4242};
  const AcquireRequest request{key, owner, token, ttl, holder};
  return store.tryAcquire(request);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A loopback port nobody listens on (bound, then released).
int closedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Backends of one application_name, as the server sees them.
std::vector<int> backendsOf(pqxx::connection& admin, const std::string& app) {
  pqxx::nontransaction tx(admin);
  std::vector<int> pids;
  for (const auto& row :
       tx.exec_params("SELECT pid FROM pg_stat_activity WHERE "
                      "application_name = $1 ORDER BY pid",
                      app)) {
    pids.push_back(row[0].as<int>());
  }
  return pids;
}

// ---------------------------------------------------------------- errors

TEST(PostgresErrors, ConnectingToAClosedPortIsATransientConnectionError) {
  PostgresStoreOptions options;
  options.connection =
      fmt::format("host=127.0.0.1 port={} connect_timeout=5", closedPort());
  PostgresStore store(options);
  const DLMException e = errorOf([&] { store.initialize(false); });
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_TRUE(e.transient());
  const DLMException e2 =
      errorOf([&] { acquire(store, pathKey("XDC#t#", "x"), "t1"); });
  EXPECT_EQ(e2.code(), ErrorCode::CONNECTION_ERROR) << e2.what();
  EXPECT_TRUE(e2.transient());
  EXPECT_TRUE(contains(e2.what(), "XDC#t#x"))
      << "the message names the lock: " << e2.what();
}

// No PostgreSQL text holds them: refused before any I/O, and quoted back
// escaped (not as raw bytes, not as the server's INTERNAL_ERROR).
TEST(PostgresErrors, AKeyOrPrefixThatIsNotUtf8IsInvalidArgument) {
  MigratedSchema schema;
  PostgresStore store(schema.options());
  store.initialize(false);
  auto& admin = adminOf(store);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { admin.listHeld("DC#\xFF"); },
           [&] { admin.listWaiters("\xC3"); },
           [&] { admin.describe("k\xFF"); },
           [&] { admin.holdersOf("k\xFF"); },
           [&] { admin.forceRelease("k\xFF"); }}) {
    const DLMException e = errorOf(call);
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_TRUE(contains(e.what(), "\\x")) << e.what();
    EXPECT_FALSE(contains(e.what(), "\xFF")) << e.what();
  }
  EXPECT_TRUE(admin.listHeld("").empty());
}

TEST(PostgresErrors, CallsOnASchemaWithoutTheFunctionsAreSchemaMismatch) {
  FreshSchema schema;
  PostgresStore store(schema.options());  // not initialized on purpose
  const DLMException e =
      errorOf([&] { acquire(store, pathKey("XDC#t#", "x"), "t1"); });
  EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
  EXPECT_TRUE(contains(e.what(), "V1__create_lock_tables.sql")) << e.what();
  const DLMException e2 = errorOf([&] { store.describe("XDC#t#x"); });
  EXPECT_EQ(e2.code(), ErrorCode::SCHEMA_MISMATCH) << e2.what();
}

TEST(PostgresErrors, OlderAndNewerSchemaVersionsAreSchemaMismatch) {
  MigratedSchema schema;
  const std::string table =
      schema.admin().quote_name(schema.name()) + ".dlm_schema_version";
  execSql(schema.admin(), "DELETE FROM " + table);
  {
    PostgresStore store(schema.options());
    const DLMException e = errorOf([&] { store.initialize(false); });
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
    EXPECT_TRUE(contains(e.what(), "V1__create_lock_tables.sql")) << e.what();
  }
  execSql(schema.admin(),
          "INSERT INTO " + table + " VALUES (1, 'v1'), (999, 'future')");
  PostgresStore store(schema.options());
  const DLMException e = errorOf([&] { store.initialize(false); });
  EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH) << e.what();
  EXPECT_TRUE(contains(e.what(), "upgrade the library")) << e.what();
  const DLMException e2 = errorOf([&] { store.initialize(true); });
  EXPECT_EQ(e2.code(), ErrorCode::SCHEMA_MISMATCH) << e2.what();
}

TEST(PostgresErrors, ArgumentsAFunctionRefusesAreInvalidWithTheSqlState) {
  MigratedSchema schema;
  PostgresStore store(schema.options());
  store.initialize(false);
  // dlm_acquire rejects a non-positive TTL (the manager validates first).
  const DLMException e =
      errorOf([&] { acquire(store, pathKey("XDC#t#", "x"), "t1", 0ms); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_FALSE(e.transient());
  EXPECT_TRUE(contains(e.what(), "SQLSTATE 22023")) << e.what();
}

TEST(PostgresErrors, RowLockTimeoutIsNotAcquiredForTryAcquireElseTransient) {
  MigratedSchema schema;
  // The store's sessions give up on a row lock after 100 ms.
  PostgresStoreOptions options = schema.options();
  options.rowLockWait = 100ms;
  PostgresStore store(options);
  store.initialize(false);
  const StoreKey key = pathKey("XDC#t#", "busy");
  ASSERT_TRUE(acquire(store, key, "t1").acquired);
  // Another session sits on the row lock in an open transaction.
  auto other = adminConnection();
  pqxx::work tx(*other);
  tx.exec("SET LOCAL search_path = " + other->quote_name(schema.name()));
  tx.exec_params("SELECT 1 FROM dlm_locks WHERE resource = $1 FOR UPDATE",
                 key.key);
  // tryAcquire: the key is busy, an answer rather than an error.
  const auto start = std::chrono::steady_clock::now();
  const AcquireResult busy = acquire(store, key, "t2");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_FALSE(busy.acquired);
  EXPECT_EQ(busy.blockedBy, key.key);
  // Elsewhere 55P03 stays a transient failure.
  const DLMException e =
      errorOf([&] { store.release(key, "t1", dlm::LockMode::EXCLUSIVE); });
  EXPECT_EQ(e.code(), ErrorCode::RETRIES_EXHAUSTED) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_TRUE(contains(e.what(), "55P03")) << e.what();
  tx.abort();
  // The connection stays usable after a statement error.
  EXPECT_TRUE(store.release(key, "t1", dlm::LockMode::EXCLUSIVE));
}

TEST(PostgresErrors, MigratingIntoAMissingSchemaSaysItDoesNotExist) {
  PostgresStoreOptions options;
  options.schema = uniqueName("dlm_missing");
  PostgresStore store(options);
  const DLMException e = errorOf([&] { store.initialize(true); });
  EXPECT_EQ(e.code(), ErrorCode::TABLE_CREATION_ERROR) << e.what();
  EXPECT_TRUE(contains(e.what(), "does not exist")) << e.what();
}

TEST(PostgresErrors, FailedMigrationIsTableCreationErrorWithTheSqlState) {
  MigratedSchema dlmClientExists;  // the role below needs dlm_client
  FreshSchema schema;
  ClientRole role(schema.admin());
  // The role may use the schema but not create in it.
  execSql(schema.admin(), fmt::format("GRANT USAGE ON SCHEMA {} TO {}",
                                      schema.admin().quote_name(schema.name()),
                                      schema.admin().quote_name(role.name())));
  PostgresStore store(schema.options(fmt::format("user={}", role.name())));
  const DLMException e = errorOf([&] { store.initialize(true); });
  EXPECT_EQ(e.code(), ErrorCode::TABLE_CREATION_ERROR) << e.what();
  EXPECT_TRUE(contains(e.what(), "SQLSTATE 42501")) << e.what();
  EXPECT_TRUE(contains(e.what(), "V1__create_lock_tables.sql")) << e.what();
}

// ------------------------------------------------------------ privileges

TEST(PostgresPrivileges, ClientRoleCanUseEveryStoreOperation) {
  MigratedSchema schema;
  ClientRole role(schema.admin());
  {
    PostgresStore store(schema.options(fmt::format("user={}", role.name())));
    store.initialize(false);
    const StoreKey key = pathKey("XDC#P#", "jobs.nightly.import");
    const AcquireResult a = acquire(store, key, "tok-1");
    ASSERT_TRUE(a.acquired);
    EXPECT_EQ(a.fencingToken, 1);
    const StoreKey root = pathKey("XDC#P#", "jobs");
    EXPECT_FALSE(acquire(store, root, "tok-2").acquired);
    EXPECT_TRUE(store.extend(key.key, "tok-1", 20s, dlm::LockMode::EXCLUSIVE)
                    .has_value());
    const auto record = store.describe(key.key);
    ASSERT_TRUE(record.has_value());
    EXPECT_TRUE(record->held);
    EXPECT_EQ(store.listHeld("XDC#P#").size(), 1u);
    EXPECT_TRUE(store.release(key, "tok-1", dlm::LockMode::EXCLUSIVE));
    EXPECT_TRUE(acquire(store, root, "tok-3").acquired);
    // Force-release is the admin role's (migration V3).
    const DLMException denied = errorOf([&] { store.forceRelease(root.key); });
    EXPECT_TRUE(contains(denied.what(), "42501")) << denied.what();
    EXPECT_TRUE(store.release(root, "tok-3", dlm::LockMode::EXCLUSIVE));
    EXPECT_GT(store.now().time_since_epoch().count(), 0);
    store.close();
  }
  // ... and nothing more: no DDL, no writing the version table.
  auto conn = adminConnection(fmt::format("user={}", role.name()));
  const std::string s = conn->quote_name(schema.name());
  EXPECT_THROW(execSql(*conn, "CREATE TABLE " + s + ".intruder (i int)"),
               pqxx::insufficient_privilege);
  EXPECT_THROW(execSql(*conn, "INSERT INTO " + s +
                                  ".dlm_schema_version VALUES (2, 'x')"),
               pqxx::insufficient_privilege);
  EXPECT_THROW(execSql(*conn, "DROP TABLE " + s + ".dlm_locks"),
               pqxx::sql_error);
}

// ------------------------------------------------------------------ pool

TEST(PostgresPool, TerminatedBackendIsReplacedAndTheNextCallWorks) {
  MigratedSchema schema;
  const std::string app = uniqueName("dlm_pgtest_app");
  PostgresStoreOptions options = schema.options("application_name=" + app);
  options.poolSize = 1;
  PostgresStore store(options);
  store.initialize(false);
  const auto before = backendsOf(schema.admin(), app);
  ASSERT_EQ(before.size(), 1u);
  execSql(schema.admin(),
          fmt::format("SELECT pg_terminate_backend({})", before[0]));
  ASSERT_TRUE(
      eventually([&] { return backendsOf(schema.admin(), app).empty(); }));

  // The pooled connection is dead: the store notices, opens a new one and
  // the call succeeds.
  EXPECT_GT(store.now().time_since_epoch().count(), 0);
  const AcquireResult a = acquire(store, pathKey("XDC#t#", "after.break"), "t1");
  EXPECT_TRUE(a.acquired);
  const auto after = backendsOf(schema.admin(), app);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after[0], before[0]);
}

// Plain connections from the PG* variables, for a bare pool.
internal::ConnectionPool::Connect plainConnections() {
  return [](Deadline d) {
    return internal::PgConn::open(internal::ConnParams::parse(""), d);
  };
}

TEST(PostgresPool, CallerWaitsForAFreeConnectionThenFailsTransiently) {
  internal::ConnectionPool pool(1, 150ms, plainConnections());
  auto first = pool.lease(deadlineAfter(5s));
  const auto start = std::chrono::steady_clock::now();
  const DLMException e = errorOf([&] { pool.lease(deadlineAfter(5s)); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 2s);

  // A lease given back in time is handed to the waiter.
  std::thread giver([lease = std::move(first)]() mutable {
    std::this_thread::sleep_for(50ms);
    auto dropped = std::move(lease);
  });
  auto second = pool.lease(deadlineAfter(5s));
  giver.join();
  EXPECT_EQ(pool.openCount(), 1u);
}

TEST(PostgresPool, WaitsNoLongerThanTheDeadlineNorOverflowsAHugePoolWait) {
  // A poolWait of ~292 million years: now + poolWait must saturate.
  internal::ConnectionPool pool(1, std::chrono::milliseconds::max(),
                                plainConnections());
  auto first = pool.lease(deadlineAfter(5s));
  const auto start = std::chrono::steady_clock::now();
  const DLMException e = errorOf([&] { pool.lease(deadlineAfter(100ms)); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 1s);
}

TEST(PostgresPool, DiscardedConnectionIsReplaced) {
  internal::ConnectionPool pool(1, 1s, plainConnections());
  {
    auto lease = pool.lease(deadlineAfter(5s));
    lease.discard();
  }
  EXPECT_EQ(pool.openCount(), 0u);
  auto lease = pool.lease(deadlineAfter(5s));
  EXPECT_TRUE(lease->usable());
  EXPECT_FALSE(lease.reused());
  EXPECT_EQ(pool.openCount(), 1u);
}

TEST(PostgresPool, DropIdleClosesThatGenerationAndOlderOnly) {
  internal::ConnectionPool pool(3, 1s, plainConnections());
  std::uint64_t old = 0;
  {
    auto a = pool.lease(deadlineAfter(5s));
    {
      auto b = pool.lease(deadlineAfter(5s));
      EXPECT_EQ(a.generation(), b.generation());
      old = a.generation();
    }
    EXPECT_EQ(pool.openCount(), 2u);  // b idle, a leased
    pool.dropIdle(old);
    EXPECT_EQ(pool.openCount(), 1u);  // b closed
    // Opened after the drop: a newer generation.
    auto c = pool.lease(deadlineAfter(5s));
    EXPECT_FALSE(c.reused());
    EXPECT_GT(c.generation(), old);
  }
  // a (old) was closed on its return, c (new) kept.
  EXPECT_EQ(pool.openCount(), 1u);
  pool.dropIdle(old);
  EXPECT_EQ(pool.openCount(), 1u);
  auto again = pool.lease(deadlineAfter(5s));
  EXPECT_TRUE(again.reused());
  EXPECT_GT(again.generation(), old);
}

TEST(PostgresPool, NeverOpensMoreThanPoolSizeUnderLoad) {
  MigratedSchema schema;
  const std::string app = uniqueName("dlm_pgtest_app");
  PostgresStoreOptions options = schema.options("application_name=" + app);
  options.poolSize = 2;
  PostgresStore store(options);
  store.initialize(false);
  std::atomic<bool> done{false};
  std::size_t most = 0;
  auto monitorConn = adminConnection();
  std::thread monitor([&] {
    while (!done) {
      most = std::max(most, backendsOf(*monitorConn, app).size());
      std::this_thread::sleep_for(2ms);
    }
  });
  std::vector<std::thread> workers;
  std::atomic<int> acquired{0};
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const StoreKey key = pathKey("XDC#t#", fmt::format("w{}.k{}", t, i % 3));
        const std::string token = fmt::format("tok-{}-{}", t, i);
        if (acquire(store, key, token).acquired) {
          ++acquired;
          store.release(key, token, dlm::LockMode::EXCLUSIVE);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  done = true;
  monitor.join();
  EXPECT_EQ(acquired.load(), 8 * 30);
  EXPECT_LE(most, 2u);
  EXPECT_GE(most, 1u);
}

TEST(PostgresPool, CloseDropsTheConnectionsAndLaterCallsAreInternalErrors) {
  MigratedSchema schema;
  const std::string app = uniqueName("dlm_pgtest_app");
  PostgresStore store(schema.options("application_name=" + app));
  store.initialize(false);
  ASSERT_EQ(backendsOf(schema.admin(), app).size(), 1u);
  store.close();
  EXPECT_TRUE(
      eventually([&] { return backendsOf(schema.admin(), app).empty(); }));
  const DLMException e = errorOf([&] { store.now(); });
  EXPECT_EQ(e.code(), ErrorCode::INTERNAL_ERROR) << e.what();
  EXPECT_TRUE(contains(e.what(), "store closed")) << e.what();
  EXPECT_EQ(errorOf([&] { acquire(store, pathKey("XDC#t#", "x"), "t"); }).code(),
            ErrorCode::INTERNAL_ERROR);
  EXPECT_EQ(errorOf([&] { store.initialize(false); }).code(),
            ErrorCode::INTERNAL_ERROR);
  store.close();  // idempotent
}

// ------------------------------------------------ what this store records

class PostgresStoreTest : public ::testing::Test {
 protected:
  PostgresStoreTest() : store_(schema_.options()) { store_.initialize(false); }

  MigratedSchema schema_;
  PostgresStore store_;
};

TEST_F(PostgresStoreTest,
       RetryWithTheHoldingTokenAnswersAcquiredWithTheSameValues) {
  const StoreKey key = pathKey("XDC#t#", "a.b");
  const AcquireResult first = acquire(store_, key, "tok-1");
  ASSERT_TRUE(first.acquired);
  const AcquireResult retry = acquire(store_, key, "tok-1");
  EXPECT_TRUE(retry.acquired);
  EXPECT_EQ(retry.fencingToken, first.fencingToken);
  EXPECT_EQ(retry.acquiredAt, first.acquiredAt);
  EXPECT_EQ(retry.expiresAt, first.expiresAt);
  const AcquireResult other = acquire(store_, key, "tok-2");
  EXPECT_FALSE(other.acquired);
  EXPECT_EQ(other.blockedBy, key.key);
}

TEST_F(PostgresStoreTest, ReleaseIsRepeatableByItsTokenOnly) {
  const StoreKey key = pathKey("XDC#t#", "r");
  ASSERT_TRUE(acquire(store_, key, "tok-1").acquired);
  EXPECT_FALSE(store_.release(key, "tok-other", dlm::LockMode::EXCLUSIVE));
  EXPECT_TRUE(store_.release(key, "tok-1", dlm::LockMode::EXCLUSIVE));
  EXPECT_TRUE(store_.release(key, "tok-1",
                             dlm::LockMode::EXCLUSIVE));  // a retried release
  const AcquireResult second = acquire(store_, key, "tok-2");
  ASSERT_TRUE(second.acquired);
  EXPECT_EQ(second.fencingToken, 2);
  EXPECT_FALSE(store_.release(key, "tok-1", dlm::LockMode::EXCLUSIVE));
  EXPECT_FALSE(store_.release(StoreKey{"XDC#t#never", {}, {}, {}}, "tok-1",
                              dlm::LockMode::EXCLUSIVE));
}

TEST_F(PostgresStoreTest,
       AncestorRowsCreatedForIntentionLocksAreNotDescribedAsLocked) {
  const StoreKey key = pathKey("XDC#t#", "a.b.c");
  ASSERT_TRUE(acquire(store_, key, "tok-1", 5s, "owner-x").acquired);
  EXPECT_FALSE(store_.describe("XDC#t#a").has_value());
  EXPECT_FALSE(store_.describe("XDC#t#a.b").has_value());
  const auto r = store_.describe(key.key);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->key, key.key);
  EXPECT_TRUE(r->held);
  EXPECT_TRUE(r->statusHeld);
  EXPECT_EQ(r->owner, store_.listedOwner("owner-x"));
  EXPECT_EQ(r->fencingToken, 1);
  EXPECT_EQ(r->ttl, 5s);
  EXPECT_EQ(r->expiresAt - r->acquiredAt, 5s);
  EXPECT_EQ(r->holder.host, "test-host");
  EXPECT_EQ(r->holder.pid, 4242);
  // The rows exist, with the client's CRC-32 and the client address.
  pqxx::nontransaction tx(schema_.admin());
  tx.exec("SET search_path = " + schema_.admin().quote_name(schema_.name()));
  const pqxx::result rows = tx.exec(
      "SELECT resource, resource_crc, fencing_token, "
      "holder_ip IS NOT DISTINCT FROM inet_client_addr() "
      "FROM dlm_locks ORDER BY resource");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0].as<std::string>(), "XDC#t#a");
  EXPECT_EQ(rows[0][2].as<std::int64_t>(), 0);
  EXPECT_EQ(rows[2][1].as<std::int64_t>(), internal::crc32("XDC#t#a.b.c"));
  EXPECT_TRUE(rows[2][3].as<bool>()) << "holder_ip is the client address";
}

TEST_F(PostgresStoreTest, ListHeldMatchesPrefixesByBytesInKeyOrder) {
  for (const char* id : {"a", "ab", "b", "é1", "é2", "a~"}) {
    ASSERT_TRUE(
        acquire(store_, pathKey("XDC#L#", id), std::string("tok-") + id).acquired)
        << id;
  }
  ASSERT_FALSE(acquire(store_, pathKey("XDC#L#", "a.b"), "tok-a.b").acquired);
  auto keys = [](const std::vector<LockRecord>& records) {
    std::vector<std::string> out;
    for (const auto& r : records) out.push_back(r.key);
    return out;
  };
  EXPECT_EQ(keys(store_.listHeld("XDC#L#a")),
            (std::vector<std::string>{"XDC#L#a", "XDC#L#ab", "XDC#L#a~"}));
  EXPECT_EQ(keys(store_.listHeld("XDC#L#é")),
            (std::vector<std::string>{"XDC#L#é1", "XDC#L#é2"}));
  EXPECT_EQ(keys(store_.listHeld("XDC#L#")).size(), 6u);
  EXPECT_EQ(keys(store_.listHeld("")).size(), 6u);
  EXPECT_TRUE(store_.listHeld("XDC#L#zz").empty());
  ASSERT_TRUE(store_.release(StoreKey{"XDC#L#b", {}, {}, {}}, "tok-b",
                             dlm::LockMode::EXCLUSIVE));
  EXPECT_EQ(keys(store_.listHeld("XDC#L#")).size(), 5u);
}

TEST_F(PostgresStoreTest, TimesComeFromTheDatabaseClock) {
  const StoreTime before = store_.now();
  const AcquireResult a =
      acquire(store_, pathKey("XDC#t#", "clock"), "tok", 1500ms);
  const StoreTime after = store_.now();
  ASSERT_TRUE(a.acquired);
  EXPECT_LE(before, a.acquiredAt);
  EXPECT_LE(a.acquiredAt, after);
  EXPECT_EQ(a.expiresAt - a.acquiredAt, 1500ms);
  const auto extended =
      store_.extend("XDC#t#clock", "tok", 3s, dlm::LockMode::EXCLUSIVE);
  ASSERT_TRUE(extended.has_value());
  EXPECT_GE(*extended, after + 3s);
}

TEST_F(PostgresStoreTest, ForceReleaseFreesAnyHolderWhoThenCannotExtend) {
  const StoreKey key = pathKey("XDC#t#", "forced");
  ASSERT_TRUE(acquire(store_, key, "tok-1").acquired);
  EXPECT_TRUE(store_.forceRelease(key.key));
  EXPECT_FALSE(store_.forceRelease(key.key));
  EXPECT_FALSE(store_.extend(key.key, "tok-1", 5s, dlm::LockMode::EXCLUSIVE)
                   .has_value());
  EXPECT_TRUE(acquire(store_, key, "tok-2").acquired);
  EXPECT_FALSE(store_.forceRelease("XDC#t#never-locked"));
}

TEST_F(PostgresStoreTest, ExpiredButUntakenLockCanBeExtendedByItsHolder) {
  const StoreKey key = pathKey("XDC#t#", "lapsed");
  ASSERT_TRUE(acquire(store_, key, "tok-1", 50ms).acquired);
  std::this_thread::sleep_for(120ms);
  const auto r = store_.describe(key.key);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->held);
  EXPECT_TRUE(r->statusHeld);
  EXPECT_TRUE(store_.extend(key.key, "tok-1", 5s, dlm::LockMode::EXCLUSIVE)
                  .has_value());
  EXPECT_TRUE(store_.describe(key.key)->held);
}

// ------------------------------------------- the hierarchy's row locks
// An acquirer in flight holds its ancestors' rows FOR SHARE and its target
// FOR UPDATE until its transaction ends. These tests hold such locks from
// another session and check who has to wait: the store sessions give up on
// a row lock after rowLockWait = 200 ms (55P03 -> not acquired, blocked by
// the key), so "had to wait" is a refusal after 200 ms and "did not wait"
// is an answer at once.

PostgresStoreOptions rowLockWait200(PostgresStoreOptions options) {
  options.rowLockWait = 200ms;
  return options;
}

// Acquires and says whether the call waited out rowLockWait and was refused.
bool waitedForARowLock(LockStore& store, const StoreKey& key) {
  const auto start = std::chrono::steady_clock::now();
  const AcquireResult r = acquire(store, key, "tok");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 2s) << "bounded by rowLockWait plus slack";
  return !r.acquired && r.blockedBy == key.key && took >= 190ms;
}

class RowLockProtocolTest : public ::testing::Test {
 protected:
  RowLockProtocolTest() : store_(rowLockWait200(schema_.options())) {
    store_.initialize(false);
    // Create the rows of p, p.a and p.b (intention rows stay after release).
    for (const char* id : {"p.a", "p.b"}) {
      const StoreKey k = pathKey("XDC#t#", id);
      EXPECT_TRUE(acquire(store_, k, "setup").acquired);
      EXPECT_TRUE(store_.release(k, "setup", dlm::LockMode::EXCLUSIVE));
    }
  }

  // Another session's open transaction holding `mode` on the row of `key`.
  std::unique_ptr<pqxx::work> holdRow(const std::string& key,
                                      const std::string& mode) {
    auto tx = std::make_unique<pqxx::work>(*other_);
    tx->exec("SET LOCAL search_path = " + other_->quote_name(schema_.name()));
    const auto rows = tx->exec_params(
        "SELECT 1 FROM dlm_locks WHERE resource = $1 FOR " + mode, key);
    EXPECT_EQ(rows.size(), 1U);
    return tx;
  }

  MigratedSchema schema_;
  PostgresStore store_;
  std::unique_ptr<pqxx::connection> other_ = adminConnection();
};

TEST_F(RowLockProtocolTest, SiblingDoesNotWaitForAnInFlightSiblingOnTheParent) {
  auto sibling = holdRow("XDC#t#p", "SHARE");  // p.a's acquirer, mid-transaction
  const AcquireResult r = acquire(store_, pathKey("XDC#t#", "p.b"), "tok");
  EXPECT_TRUE(r.acquired);
}

TEST_F(RowLockProtocolTest, ParentWaitsForAnInFlightChildAcquisition) {
  auto child = holdRow("XDC#t#p", "SHARE");
  EXPECT_TRUE(waitedForARowLock(store_, pathKey("XDC#t#", "p")));
  child->commit();
  EXPECT_TRUE(acquire(store_, pathKey("XDC#t#", "p"), "tok").acquired);
}

TEST_F(RowLockProtocolTest, ChildWaitsForAnInFlightParentAcquisition) {
  auto parent = holdRow("XDC#t#p", "UPDATE");
  EXPECT_TRUE(waitedForARowLock(store_, pathKey("XDC#t#", "p.b")));
  parent->abort();
  EXPECT_TRUE(acquire(store_, pathKey("XDC#t#", "p.b"), "tok").acquired);
}

}  // namespace
}  // namespace dlm::test
