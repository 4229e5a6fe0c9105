#include "faults/ha_formation.h"

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <thread>

#include "hold_log.h"

namespace dlm::test::faults {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Single quotes for the shell.
std::string shellQuoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace

std::string haUrl() { return variable("DLM_TEST_HA_URL"); }
std::string haDir() { return variable("DLM_TEST_HA_DIR"); }

bool runFormationScript(const std::string& command, const std::string& arg) {
  std::string line = shellQuoted(DLM_HA_SCRIPT) + " " + shellQuoted(command) +
                     " " + shellQuoted(haDir());
  if (!arg.empty()) line += " " + shellQuoted(arg);
  return std::system(line.c_str()) == 0;
}

std::optional<int> primaryPort(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const std::string url = haUrl();
  do {
    const char* keys[] = {"dbname", "connect_timeout", nullptr};
    const char* values[] = {url.c_str(), "1", nullptr};
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(
        PQconnectdbParams(keys, values, /*expand_dbname=*/1), &PQfinish);
    if (PQstatus(conn.get()) == CONNECTION_OK) {
      std::unique_ptr<PGresult, decltype(&PQclear)> r(
          PQexec(conn.get(), "SELECT inet_server_port()"), &PQclear);
      if (PQresultStatus(r.get()) == PGRES_TUPLES_OK &&
          PQntuples(r.get()) == 1) {
        return std::atoi(PQgetvalue(r.get(), 0, 0));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < until);
  return std::nullopt;
}

std::optional<std::int64_t> waitForNewPrimary(int oldPort,
                                              std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    const auto port = primaryPort(std::chrono::milliseconds(0));
    if (port && *port != oldPort) return oracle::steadyNowNs();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

}  // namespace dlm::test::faults
