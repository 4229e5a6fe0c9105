// Time bounds on PostgreSQL: every store call ends within its deadline whatever
// the server does, the first call after mass backend termination succeeds,
// connections say who they are, and no password reaches a message.
#include <arpa/inet.h>
#include <dirent.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/lock_manager.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_errors.h"
#include "postgres/pg_client_role_support.h"
#include "postgres/pg_migrate.h"
#include "postgres/pg_session.h"
#include "postgres/pg_release_channel.h"
#include "support/error_code.h"
#include "support/eventually.h"
#include "support/pg_test_support.h"
#include "support/test_keys.h"
#include "support/test_stores.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A loopback TCP port that completes the handshake (the kernel does, from
// the listen backlog) and never says a word: a server that accepts but is
// silent.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  SilentServer(const SilentServer&) = delete;
  SilentServer& operator=(const SilentServer&) = delete;

  int port() const { return port_; }
  std::string conninfo() const {
    return fmt::format("host=127.0.0.1 port={} sslmode=disable", port_);
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

AcquireResult acquire(LockStore& store, const StoreKey& key,
                      const std::string& token) {
  const AcquireRequest request{key, "owner-1", token, 10s,
                               Holder{"test-host", 1}};
  return store.tryAcquire(request);
}

std::vector<int> pidsWhere(pqxx::connection& admin, const std::string& cond,
                           const std::string& arg) {
  pqxx::nontransaction tx(admin);
  std::vector<int> pids;
  for (const auto& row :
       tx.exec_params("SELECT pid FROM pg_stat_activity WHERE " + cond, arg)) {
    pids.push_back(row[0].as<int>());
  }
  return pids;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ------------------------------------------------------- a silent server

TEST(BoundedTime, TimeOptionsMustBePositive) {
  PostgresStoreOptions noWait;
  noWait.rowLockWait = 0ms;  // lock_timeout = 0 would wait forever
  EXPECT_EQ(codeOf([&] { PostgresStore store(noWait); }),
            ErrorCode::INVALID_ARGUMENT);
  PostgresStoreOptions noTime;
  noTime.operationTimeout = -1ms;
  EXPECT_EQ(codeOf([&] { PostgresStore store(noTime); }),
            ErrorCode::INVALID_ARGUMENT);
}

TEST(BoundedTime, SilentServerFailsTransientlyByTheCallersDeadline) {
  SilentServer silent;
  PostgresStoreOptions options;
  options.connection = silent.conninfo();
  PostgresStore store(options);
  const auto start = Clock::now();
  const DLMException e = errorOf([&] {
    DeadlineScope scope(deadlineAfter(300ms));
    acquire(store, pathKey("XDC#t#", "silent"), "t1");
  });
  const auto took = Clock::now() - start;
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_TRUE(contains(e.what(), "XDC#t#silent")) << e.what();
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 800ms);
}

TEST(BoundedTime, SilentServerWithoutAScopeFailsWithinOperationTimeout) {
  SilentServer silent;
  PostgresStoreOptions options;
  options.connection = silent.conninfo();
  options.operationTimeout = 400ms;
  PostgresStore store(options);
  for (int i = 0; i < 2; ++i) {
    const auto start = Clock::now();
    const DLMException e = errorOf([&] { store.now(); });
    const auto took = Clock::now() - start;
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_TRUE(e.transient());
    EXPECT_GE(took, 390ms);
    EXPECT_LT(took, 900ms);
  }
  // The release channel's subscribe is bounded the same way.
  struct Listener : ReleaseListener {
    void released(std::string_view) override {}
    void missedReleases() override {}
  } listener;
  const auto start = Clock::now();
  EXPECT_FALSE(store.subscribeReleases(&listener));
  EXPECT_LT(Clock::now() - start, 900ms);
}

TEST(BoundedTime, CloseInterruptsTheReleaseChannelReconnectingToASilentServer) {
  SilentServer silent;
  const std::string app = uniqueName("dlm_listen");
  std::atomic<bool> useSilent{false};
  // The first connection reaches the real server; reconnections after its
  // backend is killed reach the silent one.
  internal::PgReleaseChannel channel(
      [&](Deadline d, int wakeFd) {
        auto p = internal::ConnParams::parse(useSilent ? silent.conninfo()
                                                       : std::string());
        p.set("application_name", app);
        return internal::PgConn::open(p, d, wakeFd);
      },
      30s);
  RecordingListener listener;
  ASSERT_TRUE(channel.subscribe(&listener));
  useSilent = true;
  auto admin = adminConnection();
  execSql(*admin,
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
          "WHERE application_name = " +
              admin->quote(app));
  // Let the worker notice and start its (30 s) reconnection.
  std::this_thread::sleep_for(300ms);
  const auto start = Clock::now();
  channel.close();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_FALSE(channel.running());
}

TEST(BoundedTime, ASilentFirstHostOfSeveralLeavesTimeForTheNext) {
  // An HA URL whose first host hangs: the next one must still be tried.
  SilentServer silent;
  MigratedSchema schema;
  const char* host = std::getenv("PGHOST");
  const char* port = std::getenv("PGPORT");
  ASSERT_TRUE(host != nullptr && port != nullptr);
  PostgresStore store(
      schema.options(fmt::format("host=127.0.0.1,{} port={},{} sslmode=disable",
                                 host, silent.port(), port)));
  const auto start = Clock::now();
  {
    DeadlineScope scope(deadlineAfter(2s));
    store.initialize(false);
  }
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 900ms) << "the silent host had half the time";
  EXPECT_LT(took, 2s);
}

// ------------------------------------------- a server stalled mid-query

TEST(BoundedTime, StalledBackendFailsByTheDeadlineAndTheNextCallRecovers) {
  MigratedSchema schema;
  PostgresStoreOptions options = schema.options();
  options.applicationName = uniqueName("dlm_stall");
  PostgresStore store(options);
  store.initialize(false);
  const auto pids = pidsWhere(schema.admin(), "application_name = $1",
                              options.applicationName);
  ASSERT_EQ(pids.size(), 1u);
  // SIGSTOP the backend: the TCP connection stays up, nothing answers.
  ASSERT_EQ(::kill(pids[0], SIGSTOP), 0);
  const auto start = Clock::now();
  const DLMException e = errorOf([&] {
    DeadlineScope scope(deadlineAfter(300ms));
    store.now();
  });
  const auto took = Clock::now() - start;
  ::kill(pids[0], SIGCONT);
  EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
  EXPECT_TRUE(e.transient());
  EXPECT_TRUE(contains(e.what(), "within")) << e.what();
  EXPECT_LT(took, 800ms);
  // The stalled connection was closed, not pooled: the next call opens a
  // new one.
  DeadlineScope scope(deadlineAfter(5s));
  EXPECT_TRUE(acquire(store, pathKey("XDC#t#", "after.stall"), "t1").acquired);
}

// The parent process of `pid` (from /proc), 0 when unknown.
int parentOf(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  std::getline(stat, line);
  // "pid (comm) state ppid ...": comm may hold spaces, so after the ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  char state = 0;
  int ppid = 0;
  std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid);
  return ppid;
}

// The whole local server SIGSTOPped (postmaster and every child) while it
// lives, SIGCONTed when it ends, whatever the test does meanwhile.
class StoppedServer {
 public:
  explicit StoppedServer(int backendPid) {
    const int postmaster = parentOf(backendPid);
    EXPECT_GT(postmaster, 1);
    pids_.push_back(postmaster);
    if (DIR* proc = opendir("/proc")) {
      while (dirent* e = readdir(proc)) {
        const int pid = std::atoi(e->d_name);
        if (pid > 0 && parentOf(pid) == postmaster) pids_.push_back(pid);
      }
      closedir(proc);
    }
    for (int pid : pids_) ::kill(pid, SIGSTOP);
  }
  ~StoppedServer() {
    for (int pid : pids_) ::kill(pid, SIGCONT);
  }
  StoppedServer(const StoppedServer&) = delete;
  StoppedServer& operator=(const StoppedServer&) = delete;

 private:
  std::vector<int> pids_;
};

TEST(BoundedTime, StoppedServerFailsEveryCallByItsDeadlineAndRecovers) {
  // The users' report: with the server SIGSTOPped, every call returned only
  // when it was resumed.
  MigratedSchema schema;
  PostgresStoreOptions options = schema.options();
  options.poolSize = 2;
  options.operationTimeout = kTestStoreBudget;
  PostgresStore store(options);
  store.initialize(false);
  const int adminBackend = [&] {
    pqxx::nontransaction tx(schema.admin());
    return tx.exec("SELECT pg_backend_pid()")[0][0].as<int>();
  }();
  {
    StoppedServer stopped(adminBackend);
    // A pooled connection (no answer), then new ones (no handshake).
    for (int i = 0; i < 3; ++i) {
      const auto start = Clock::now();
      const DLMException e = errorOf([&] {
        DeadlineScope scope(deadlineAfter(300ms));
        acquire(store, pathKey("XDC#t#", "stopped"), "t1");
      });
      const auto took = Clock::now() - start;
      EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
      EXPECT_TRUE(e.transient());
      EXPECT_LT(took, 800ms) << i;
    }
  }
  // Recovery, not speed: a server just resumed on a busy machine may take
  // seconds to answer (the bounds under test were the stopped calls').
  DeadlineScope scope(deadlineAfter(kTestStoreBudget));
  EXPECT_TRUE(acquire(store, pathKey("XDC#t#", "resumed"), "t1").acquired);
}

// ---------------------------------------- another session's row lock

TEST(BoundedTime, RowLockHeldElsewhereIsNotAcquiredAfterRowLockWait) {
  MigratedSchema schema;
  PostgresStore store(schema.options());  // rowLockWait 50 ms by default
  store.initialize(false);
  const StoreKey key = pathKey("XDC#t#", "row.locked");
  ASSERT_TRUE(acquire(store, key, "t1").acquired);
  ASSERT_TRUE(store.release(key, "t1", dlm::LockMode::EXCLUSIVE));
  auto other = adminConnection();
  pqxx::work tx(*other);
  tx.exec("SET LOCAL search_path = " + other->quote_name(schema.name()));
  tx.exec_params("SELECT 1 FROM dlm_locks WHERE resource = $1 FOR UPDATE",
                 key.key);
  for (int i = 0; i < 3; ++i) {
    const auto start = Clock::now();
    const AcquireResult r = acquire(store, key, "t2");
    const auto took = Clock::now() - start;
    EXPECT_FALSE(r.acquired);
    EXPECT_EQ(r.blockedBy, key.key);
    EXPECT_GE(took, 45ms);
    EXPECT_LT(took, 500ms);
  }
  tx.abort();
  EXPECT_TRUE(acquire(store, key, "t2").acquired);
}

TEST(BoundedTime, TryAcquireLockUnderAnotherSessionsRowLockIsUnavailableFast) {
  // The users' report: 5.1 s while a session held the key's row lock.
  MigratedSchema schema;
  auto store = std::make_shared<PostgresStore>(schema.options());
  auto manager = DistributedLockManager::builder()
                     .clientId("clientA")
                     .farmId("farm1")
                     .store(store)
                     .build();
  manager->initialize();
  Lock first = manager->getLockInstance("row.held", LockLevel::XDC);
  manager->tryAcquireLock(first);
  ASSERT_TRUE(manager->releaseLock(first));
  const auto rows = [&] {
    pqxx::nontransaction tx(schema.admin());
    return tx.exec("SELECT resource FROM " +
                   schema.admin().quote_name(schema.name()) +
                   ".dlm_locks WHERE resource LIKE '%row.held'");
  }();
  ASSERT_EQ(rows.size(), 1u);
  const std::string key = rows[0][0].as<std::string>();
  auto other = adminConnection();
  pqxx::work tx(*other);
  tx.exec("SET LOCAL search_path = " + other->quote_name(schema.name()));
  tx.exec_params("SELECT 1 FROM dlm_locks WHERE resource = $1 FOR UPDATE", key);
  Lock lock = manager->getLockInstance("row.held", LockLevel::XDC);
  const auto start = Clock::now();
  EXPECT_EQ(codeOf([&] { manager->tryAcquireLock(lock); }),
            ErrorCode::LOCK_UNAVAILABLE);
  EXPECT_LT(Clock::now() - start, 500ms);
  tx.abort();
  manager->tryAcquireLock(lock);
  EXPECT_TRUE(manager->releaseLock(lock));
}

// --------------------------------------------------------- recovery

TEST(Recovery, FirstCallAfterTerminatingEveryDlmBackendSucceeds) {
  MigratedSchema schema;
  PostgresStoreOptions options = schema.options();
  options.poolSize = 4;
  PostgresStore store(options);
  store.initialize(false);
  for (int round = 0; round < 4; ++round) {
    // Fill the pool: several connections idle at once.
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const StoreKey k = pathKey("XDC#t#", fmt::format("r{}.t{}", round, t));
        EXPECT_TRUE(acquire(store, k, "tok").acquired);
        EXPECT_TRUE(store.release(k, "tok", dlm::LockMode::EXCLUSIVE));
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_FALSE(
        pidsWhere(schema.admin(), "starts_with(application_name, $1)", "dlm")
            .empty());
    execSql(schema.admin(),
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
            "starts_with(application_name, 'dlm') AND pid <> "
            "pg_backend_pid()");
    ASSERT_TRUE(eventually([&] {
      return pidsWhere(schema.admin(), "starts_with(application_name, $1)",
                       "dlm")
          .empty();
    }));
    // The very next call succeeds, every time.
    const StoreKey k = pathKey("XDC#t#", fmt::format("after.{}", round));
    const auto start = Clock::now();
    EXPECT_TRUE(acquire(store, k, "first").acquired) << "round " << round;
    EXPECT_LT(Clock::now() - start, 2s);
    EXPECT_TRUE(store.release(k, "first", dlm::LockMode::EXCLUSIVE));
  }
}

// Restarting the server needs its data directory, which the PG* variables
// do not give: scripts/test.sh exports DLM_TEST_PG_DIR (the throwaway
// cluster) and scripts/pg-cluster.sh restarts it. Without it the test
// fails: a PostgreSQL test never skips.
TEST(Recovery, FirstCallAfterAServerRestartSucceedsAndListenersAreWoken) {
  const char* dir = std::getenv("DLM_TEST_PG_DIR");
  ASSERT_NE(dir, nullptr) << "DLM_TEST_PG_DIR must name the throwaway "
                             "cluster (scripts/test.sh sets it)";
  const std::string restart =
      fmt::format("'{}' restart '{}'", DLM_PG_CLUSTER_SCRIPT, dir);
  // Not a FreshSchema: its admin connection dies with the restart, and
  // libpqxx 6.4 leaks a result on a dead connection (lsan.supp).
  PostgresStoreOptions options;
  options.schema = uniqueName("dlm_restart");
  options.poolSize = 4;
  {
    auto admin = adminConnection();
    execSql(*admin, "CREATE SCHEMA " + admin->quote_name(options.schema));
  }
  internal::applyPostgresMigrations(options);
  PostgresStore store(options);
  store.initialize(false);
  RecordingListener listener;
  ASSERT_TRUE(store.subscribeReleases(&listener));
  int missed = 0;
  for (const char* mode : {"fast", "immediate"}) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const StoreKey k = pathKey("XDC#t#", fmt::format("{}.t{}", mode, t));
        EXPECT_TRUE(acquire(store, k, "tok").acquired);
        EXPECT_TRUE(store.release(k, "tok", dlm::LockMode::EXCLUSIVE));
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(
        std::system(fmt::format("{} {} >/dev/null", restart, mode).c_str()), 0);
    // Wait until the server accepts connections again (not counted).
    ASSERT_TRUE(eventually(
        [] {
          try {
            adminConnection();
            return true;
          } catch (const std::exception&) {
            return false;
          }
        },
        30s, 100ms));
    const StoreKey k = pathKey("XDC#t#", fmt::format("after.{}", mode));
    EXPECT_TRUE(acquire(store, k, "first").acquired) << mode;
    // The LISTEN connection is back and says releases went unheard.
    EXPECT_TRUE(listener.waitForMissed(++missed, 15s)) << mode;
    EXPECT_TRUE(store.release(k, "first", dlm::LockMode::EXCLUSIVE));
  }
  store.unsubscribeReleases(&listener);
  auto admin = adminConnection();
  execSql(*admin, "DROP SCHEMA IF EXISTS " + admin->quote_name(options.schema) +
                      " CASCADE");
}

// ------------------------------------------------- application_name

TEST(ApplicationName, NamesTheStoreAndItsClientsInPgStatActivity) {
  MigratedSchema schema;
  PostgresStoreOptions options = schema.options();
  options.applicationName = uniqueName("dlmapp");
  PostgresStore store(options);
  store.addClient("clientB");
  store.addClient("clientA");
  store.addClient("clientA");  // once is enough
  store.initialize(false);
  const std::string expected = options.applicationName + " clientA,clientB";
  EXPECT_EQ(pidsWhere(schema.admin(), "application_name = $1", expected).size(),
            1u);
}

TEST(ApplicationName, DefaultsToDlmAndTheUsersOwnWins) {
  EXPECT_EQ(PostgresStoreOptions{}.applicationName, "dlm");
  MigratedSchema schema;
  const std::string own = uniqueName("mine");
  PostgresStore store(schema.options("application_name=" + own));
  store.addClient("clientA");
  store.initialize(false);
  EXPECT_EQ(pidsWhere(schema.admin(), "application_name = $1", own).size(), 1u);
}

TEST(ApplicationName, IsPrintableAsciiAndAtMost63Bytes) {
  const std::string name = internal::applicationNameOf(
      "dlm", {"caf\xc3\xa9", std::string(100, 'x'), "a\nb"});
  EXPECT_LE(name.size(), 63u);
  for (char c : name) {
    EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << static_cast<int>(c);
  }
  EXPECT_EQ(name.rfind("dlm a?b,caf??,xxx", 0), 0u) << name;
  EXPECT_EQ(internal::applicationNameOf("dlm", {}), "dlm");
}

// --------------------------------------------------------- passwords

TEST(Passwords, NeverAppearInExceptionMessages) {
  SilentServer silent;
  const std::vector<std::string> conninfos = {
      "host=127.0.0.1 port=1 password=s3cr3t-pw",
      "host=127.0.0.1 port=1 password='s3cr3t-pw with space'",
      "postgresql://app:s3cr3t-pw@127.0.0.1:1/db",
      "postgresql://app@127.0.0.1:1/db?password=s3cr3t-pw",
      silent.conninfo() + " password=s3cr3t-pw",
  };
  for (const auto& conninfo : conninfos) {
    PostgresStoreOptions options;
    options.connection = conninfo;
    options.operationTimeout = 300ms;
    PostgresStore store(options);
    const DLMException e = errorOf([&] { store.initialize(true); });
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_FALSE(contains(e.what(), "s3cr3t")) << e.what();
    const DLMException e2 = errorOf([&] { store.now(); });
    EXPECT_FALSE(contains(e2.what(), "s3cr3t")) << e2.what();
  }
}

TEST(Passwords, MalformedConnectionStringIsInvalidArgumentWithoutIt) {
  for (const std::string conninfo :
       {"host=x password=s3cr3t-pw bogus", "host=x password='s3cr3t-pw",
        "postgresql://app:s3cr3t-pw@[::1/db",
        "postgresql://app:s3cr3t-pw@host/db?nosuchoption=1"}) {
    PostgresStoreOptions options;
    options.connection = conninfo;
    const DLMException e = errorOf([&] { PostgresStore store(options); });
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_FALSE(e.transient());
    EXPECT_FALSE(contains(e.what(), "s3cr3t")) << e.what();
  }
}

TEST(Passwords, RedactSecretsCoversKeywordsAndUris) {
  EXPECT_EQ(internal::redactSecrets("host=h password=abc user=u"),
            "host=h password=*** user=u");
  EXPECT_EQ(internal::redactSecrets("password = 'a b\\' c' x"),
            "password = *** x");
  EXPECT_EQ(internal::redactSecrets("postgres://u:abc@h/db"),
            "postgres://u:***@h/db");
  EXPECT_EQ(internal::redactSecrets("postgresql://u@h/db?password=abc&x=1"),
            "postgresql://u@h/db?password=***&x=1");
  EXPECT_EQ(internal::redactSecrets("PASSWORD=abc"), "PASSWORD=***");
  EXPECT_EQ(internal::redactSecrets("nothing secret"), "nothing secret");
}

}  // namespace
}  // namespace dlm::test
