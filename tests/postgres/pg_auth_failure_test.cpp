// A login the server refuses (wrong password, no pg_hba.conf entry, a role
// that does not exist) is PERMISSION_DENIED with the server's SQLSTATE, not
// retried, and never shows the password. The wrong password is played by a
// server of the test's own (the test cluster trusts every local login); the
// missing role is asked of the real server.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock_manager.h"
#include "dlm/postgres_store.h"
#include "postgres/connect_error.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_errors.h"
#include "support/error_code.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPassword = "s3cret-pw-never-shown";

// Speaks just enough of the protocol to refuse every login as PostgreSQL
// 15 does: asks for a cleartext password (when `askPassword`), then sends
// the ErrorResponse (FATAL, `sqlstate`, `message`, the location fields of
// a real server) and hangs up. Counts the logins it refused.
class RefusingServer {
 public:
  RefusingServer(std::string sqlstate, std::string message, bool askPassword)
      : sqlstate_(std::move(sqlstate)),
        message_(std::move(message)),
        askPassword_(askPassword) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~RefusingServer() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  RefusingServer(const RefusingServer&) = delete;
  RefusingServer& operator=(const RefusingServer&) = delete;

  int port() const { return port_; }
  int logins() const { return logins_.load(); }
  // Whether a login sent kPassword (so the refusal was of that password).
  bool passwordSeen() const { return passwordSeen_.load(); }
  std::string conninfo() const {
    return fmt::format(
        "host=127.0.0.1 port={} user=app dbname=app password={} "
        "sslmode=disable gssencmode=disable",
        port_, kPassword);
  }

 private:
  static bool readAll(int fd, void* buf, std::size_t n) {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      const ssize_t got = ::read(fd, p, n);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
    }
    return true;
  }
  static std::uint32_t readLength(int fd) {
    std::uint32_t be = 0;
    return readAll(fd, &be, 4) ? ntohl(be) : 0;
  }
  static void send(int fd, char type, const std::string& body) {
    std::string m(1, type);
    const std::uint32_t be = htonl(static_cast<std::uint32_t>(body.size() + 4));
    m.append(reinterpret_cast<const char*>(&be), 4);
    m += body;
    (void)!::write(fd, m.data(), m.size());
  }

  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      refuse(c);
      ::close(c);
    }
  }

  void refuse(int c) {
    // The startup packet: length, protocol version, name/value pairs.
    const std::uint32_t len = readLength(c);
    if (len < 8 || len > 10000) return;
    std::string startup(len - 4, '\0');
    if (!readAll(c, startup.data(), startup.size())) return;
    if (askPassword_) {
      send(c, 'R', std::string("\0\0\0\3", 4));  // cleartext password
      char type = 0;
      if (!readAll(c, &type, 1) || type != 'p') return;
      const std::uint32_t plen = readLength(c);
      if (plen < 4 || plen > 10000) return;
      std::string password(plen - 4, '\0');
      if (!readAll(c, password.data(), password.size())) return;
      if (password == std::string(kPassword) + '\0') passwordSeen_ = true;
    }
    std::string fields;
    const auto field = [&](char code, const std::string& value) {
      fields += code;
      fields += value;
      fields += '\0';
    };
    field('S', "FATAL");
    field('V', "FATAL");
    field('C', sqlstate_);
    field('M', message_);
    field('F', "auth.c");
    field('L', "334");
    field('R', "auth_failed");
    fields += '\0';
    // Counted before the client can read the refusal.
    ++logins_;
    send(c, 'E', fields);
  }

  std::string sqlstate_;
  std::string message_;
  bool askPassword_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> logins_{0};
  std::atomic<bool> passwordSeen_{false};
  std::thread thread_;
};

void expectRefusedLogin(const DLMException& e, const std::string& state,
                        const std::string& says) {
  const std::string what = e.what();
  EXPECT_EQ(e.code(), ErrorCode::PERMISSION_DENIED) << what;
  EXPECT_FALSE(e.transient()) << what;
  EXPECT_NE(what.find("SQLSTATE " + state), std::string::npos) << what;
  EXPECT_NE(what.find(says), std::string::npos) << what;
  EXPECT_EQ(what.find("08001"), std::string::npos) << what;
  EXPECT_EQ(what.find("LOCATION"), std::string::npos) << what;
  EXPECT_EQ(what.find("auth.c"), std::string::npos) << what;
  EXPECT_EQ(what.find(kPassword), std::string::npos) << what;
}

TEST(AuthenticationFailure, AWrongPasswordIsPermissionDenied28P01NotRetried) {
  RefusingServer server(
      "28P01", "password authentication failed for user \"app\"", true);
  PostgresStoreOptions options;
  options.connection = server.conninfo();
  auto store = std::make_shared<PostgresStore>(options);
  LockConfiguration config;
  config.storeRetries = 3;
  auto manager = DistributedLockManager::builder()
                     .clientId("auth")
                     .store(store)
                     .configuration(config)
                     .build();
  const auto started = std::chrono::steady_clock::now();
  const DLMException e = errorOf([&] { manager->initialize(); });
  expectRefusedLogin(e, "28P01", "password authentication failed");
  EXPECT_TRUE(server.passwordSeen()) << "the password was sent and refused";
  EXPECT_EQ(server.logins(), 1) << "a refused login is not tried again";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  // A store call the same way, then a lock call through the manager.
  expectRefusedLogin(errorOf([&] { store->now(); }), "28P01",
                     "password authentication failed");
  EXPECT_EQ(server.logins(), 2);
}

TEST(AuthenticationFailure, NoPgHbaEntryIsPermissionDenied28000) {
  RefusingServer server(
      "28000",
      "no pg_hba.conf entry for host \"127.0.0.1\", user \"app\", database "
      "\"app\", no encryption",
      false);
  PostgresStoreOptions options;
  options.connection = server.conninfo();
  PostgresStore store(options);
  expectRefusedLogin(errorOf([&] { store.initialize(false); }), "28000",
                     "no pg_hba.conf entry");
  EXPECT_EQ(server.logins(), 1);
}

// libpq's own rule for several hosts: a host that refused the login ends
// the attempt (the next one might take the same login somewhere else).
TEST(AuthenticationFailure, ARefusedLoginDoesNotMoveOnToTheNextHost) {
  RefusingServer first(
      "28P01", "password authentication failed for user \"app\"", true);
  RefusingServer second(
      "28P01", "password authentication failed for user \"app\"", true);
  PostgresStoreOptions options;
  options.connection = fmt::format(
      "host=127.0.0.1,127.0.0.1 port={},{} user=app dbname=app password={} "
      "sslmode=disable gssencmode=disable",
      first.port(), second.port(), kPassword);
  PostgresStore store(options);
  expectRefusedLogin(errorOf([&] { store.now(); }), "28P01",
                     "password authentication failed");
  EXPECT_EQ(first.logins(), 1);
  EXPECT_EQ(second.logins(), 0);
}

// The real server (PG* variables): a login role that does not exist.
TEST(AuthenticationFailure, ARoleThatDoesNotExistIsPermissionDenied28000) {
  PostgresStoreOptions options;
  options.connection = fmt::format("user=dlm_no_such_role_{} password={}",
                                   ::getpid(), kPassword);
  PostgresStore store(options);
  const DLMException e = errorOf([&] { store.initialize(false); });
  expectRefusedLogin(e, "28000", "does not exist");
}

TEST(ParseConnectError, ReadsTheLastServersSqlStateAndDropsTheLocation) {
  using internal::parseConnectError;
  const auto wrong = parseConnectError(
      "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
      "28P01: password authentication failed for user \"app\"\n"
      "LOCATION:  auth_failed, auth.c:334\n");
  EXPECT_EQ(wrong.sqlstate, "28P01");
  EXPECT_EQ(wrong.message,
            "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
            "password authentication failed for user \"app\"");
  // Another language: only the places of the fields count.
  const auto german = parseConnectError(
      "Verbindung zum Server auf \"db\" fehlgeschlagen: FATAL:  28000: Rolle "
      "\"x\" existiert nicht\nORT:  InitializeSessionUserId, miscinit.c:768\n");
  EXPECT_EQ(german.sqlstate, "28000");
  EXPECT_EQ(german.message.find("miscinit"), std::string::npos);
  // Two addresses: the first refused the TCP connection, the second the
  // login.
  const auto two = parseConnectError(
      "connection to server at \"127.0.0.1\", port 1 failed: Connection "
      "refused\n\tIs the server running on that host and accepting TCP/IP "
      "connections?\nconnection to server at \"127.0.0.1\", port 5432 "
      "failed: FATAL:  28000: role \"x\" does not exist\nLOCATION:  "
      "InitializeSessionUserId, miscinit.c:768\n");
  EXPECT_EQ(two.sqlstate, "28000");
  EXPECT_NE(two.message.find("Connection refused"), std::string::npos);
  // libpq's own check: the server asked for a password, none was set.
  EXPECT_EQ(parseConnectError("connection to server at \"h\", port 5432 "
                              "failed: fe_sendauth: no password supplied\n")
                .sqlstate,
            "28P01");
  // No server said anything.
  EXPECT_EQ(parseConnectError("connection to server at \"h\", port 1 failed: "
                              "Connection refused\n")
                .sqlstate,
            "");
  EXPECT_EQ(parseConnectError("FATAL:  57P03: the database system is "
                              "starting up\n")
                .sqlstate,
            "57P03");
}

TEST(TranslatePgError, ARefusedLoginIsPermissionDeniedNotATransientError) {
  for (const char* state : {"28P01", "28000"}) {
    const DLMException e = [&] {
      try {
        throw internal::PgError(state, "connect: FATAL:  login refused", true);
      } catch (...) {
        return internal::translatePgError("initialize");
      }
    }();
    EXPECT_EQ(e.code(), ErrorCode::PERMISSION_DENIED) << e.what();
    EXPECT_FALSE(e.transient()) << e.what();
    EXPECT_NE(std::string(e.what()).find(state), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dlm::test
