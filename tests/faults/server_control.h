// Faults made to the throwaway PostgreSQL server from a test: restarting it
// (scripts/pg-cluster.sh restart) and terminating client backends.
#pragma once

#include <chrono>
#include <cstdint>
#include <pqxx/pqxx>
#include <string>

namespace dlm::test::faults {

// $DLM_TEST_PG_DIR (the cluster scripts/test.sh started), or "" when unset.
// The tests fail, never skip, without it.
std::string clusterDir();

// Instants (steady_clock ns) of one restart, as a client sees them.
struct RestartTimes {
  std::int64_t startNs = 0;   // the restart was asked for
  std::int64_t downNs = 0;    // the first ping the server did not accept
  std::int64_t acceptNs = 0;  // the first accepted ping after that
  std::int64_t scriptDoneNs = 0;
  double downMs() const { return static_cast<double>(acceptNs - downNs) / 1e6; }
};

// pg_ctl restart -m <mode> ("fast" or "immediate") through
// scripts/pg-cluster.sh, pinging the server (PQping, PG* variables) every
// few ms meanwhile: pg_ctl itself notices readiness up to 100 ms late, and
// the tests measure recovery from the instant the server accepts. Throws
// std::runtime_error when the script fails or takes over 60 s, or the
// server does not accept again within 10 s of it.
RestartTimes restartServer(const std::string& dir, const std::string& mode);

// Connects (PG* variables, superuser) until it works or `limit` passes;
// throws then. For checking that the server is up again.
std::unique_ptr<pqxx::connection> connectWithin(
    std::chrono::milliseconds limit);

// Terminates every backend of `role` (pg_terminate_backend); the number
// terminated. `admin` must be a superuser connection of another role.
std::int64_t terminateBackends(pqxx::connection& admin,
                               const std::string& role);

// The role of a "postgresql://ROLE@..." URL ("" when it names none).
std::string roleOfUrl(const std::string& url);

}  // namespace dlm::test::faults
