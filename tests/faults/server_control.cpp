#include "faults/server_control.h"

#include <libpq-fe.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hold_log.h"
#include "support/pg_test_support.h"

extern char** environ;

namespace dlm::test::faults {

std::string clusterDir() {
  const char* dir = std::getenv("DLM_TEST_PG_DIR");
  return dir ? dir : "";
}

RestartTimes restartServer(const std::string& dir, const std::string& mode) {
  RestartTimes t;
  std::vector<std::string> args{DLM_PG_CLUSTER_SCRIPT, "restart", dir, mode};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  t.startNs = oracle::steadyNowNs();
  const int rc = posix_spawn(&pid, DLM_PG_CLUSTER_SCRIPT, nullptr, nullptr,
                             argv.data(), environ);
  if (rc != 0) {
    throw std::runtime_error(std::string("posix_spawn pg-cluster.sh: ") +
                             std::strerror(rc));
  }
  // Ping the server while the script runs; first "down", then "accepting".
  auto ping = [&t] {
    const bool up = PQping("") == PQPING_OK;
    const std::int64_t now = oracle::steadyNowNs();
    if (!up && t.downNs == 0) t.downNs = now;
    if (up && t.downNs != 0 && t.acceptNs == 0) t.acceptNs = now;
  };
  // Bounded: a restart that hangs fails the test instead of hanging it.
  const auto killAt =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error("waitpid failed");
    if (std::chrono::steady_clock::now() >= killAt) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      throw std::runtime_error("pg-cluster.sh restart took over 60 s");
    }
    ping();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  t.scriptDoneNs = oracle::steadyNowNs();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("pg-cluster.sh restart " + mode +
                             " failed (status " + std::to_string(status) + ")");
  }
  const auto giveUp =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (t.acceptNs == 0 && t.downNs != 0 &&
         std::chrono::steady_clock::now() < giveUp) {
    ping();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (t.downNs == 0) {
    // The pings never caught it down (a very quick restart): the script's
    // end is then the best known instant of accepting again.
    t.downNs = t.startNs;
    t.acceptNs = t.scriptDoneNs;
  }
  if (t.acceptNs == 0) {
    throw std::runtime_error(
        "the server did not accept connections within "
        "10 s of pg-cluster.sh restart");
  }
  return t;
}

std::unique_ptr<pqxx::connection> connectWithin(
    std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    try {
      return std::make_unique<pqxx::connection>("");
    } catch (const pqxx::broken_connection&) {
      // Still starting up: "the database system is starting up".
      if (std::chrono::steady_clock::now() >= deadline) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::int64_t terminateBackends(pqxx::connection& admin,
                               const std::string& role) {
  pqxx::nontransaction tx(admin);
  const auto r = tx.exec_params(
      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
      "FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()",
      role);
  return r[0][0].as<std::int64_t>();
}

std::string roleOfUrl(const std::string& url) {
  const auto scheme = url.find("://");
  const auto at = url.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) {
    return "";
  }
  return url.substr(scheme + 3, at - scheme - 3);
}

}  // namespace dlm::test::faults
