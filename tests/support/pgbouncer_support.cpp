#include "support/pgbouncer_support.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace dlm::test {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw std::runtime_error(fmt::format(
        "{} is not set: start PgBouncer with scripts/pgbouncer.sh (the test "
        "command does) and export its env file",
        name));
  }
  return value;
}

}  // namespace

std::string pgbouncerConninfo(const std::string& user) {
  return fmt::format("host=127.0.0.1 port={} user={}",
                     variable("DLM_TEST_PGBOUNCER_PORT"), user);
}

std::string pgbouncerUrl(const std::string& user) {
  const char* host = std::getenv("PGHOST");
  return fmt::format(
      "postgresql://{}@127.0.0.1:{}?dlm_pooler_safe=true&dlm_listen_host={}&"
      "dlm_listen_port={}",
      user, variable("DLM_TEST_PGBOUNCER_PORT"),
      host != nullptr ? host : "127.0.0.1", variable("PGPORT"));
}

void allowThroughPgbouncer(const std::string& role) {
  static std::mutex mu;  // one writer of the file per process
  std::lock_guard<std::mutex> lock(mu);
  {
    std::ofstream users(variable("DLM_TEST_PGBOUNCER_AUTH_FILE"),
                        std::ios::app);
    users << '"' << role << "\" \"\"\n";
    if (!users) throw std::runtime_error("cannot append to PgBouncer's users");
  }
  // libpq, not libpqxx: the admin console's server_version ("1.18.0/
  // bouncer") is not one libpqxx accepts.
  const char* admin = std::getenv("PGUSER");
  const std::string conninfo =
      fmt::format("host=127.0.0.1 port={} dbname=pgbouncer user={}",
                  variable("DLM_TEST_PGBOUNCER_PORT"),
                  admin != nullptr ? admin : "postgres");
  std::unique_ptr<PGconn, decltype(&PQfinish)> console(
      PQconnectdb(conninfo.c_str()), &PQfinish);
  if (PQstatus(console.get()) != CONNECTION_OK) {
    throw std::runtime_error(
        fmt::format("PgBouncer's console: {}", PQerrorMessage(console.get())));
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> r(
      PQexec(console.get(), "RELOAD"), &PQclear);
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    throw std::runtime_error(
        fmt::format("PgBouncer RELOAD: {}", PQerrorMessage(console.get())));
  }
}

}  // namespace dlm::test
