// Faults made to the throwaway PostgreSQL server from a test: restarting it
// (scripts/pg-cluster.sh restart) and terminating client backends.
#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <cstdint>
#include <string>

namespace dlm::test::faults {

// $DLM_TEST_PG_DIR (the cluster scripts/test.sh started), or "" when unset.
// The tests fail, never skip, without it.
std::string clusterDir();

// pg_ctl restart -m <mode> ("fast" or "immediate") through
// scripts/pg-cluster.sh, which returns once the server accepts connections.
// Throws std::runtime_error when the script fails or takes over 60 s.
void restartServer(const std::string& dir, const std::string& mode);

// Connects (PG* variables, superuser) until it works or `limit` passes;
// throws then. For checking that the server is up again.
std::unique_ptr<pqxx::connection> connectWithin(std::chrono::milliseconds limit);

// Terminates every backend of `role` (pg_terminate_backend); the number
// terminated. `admin` must be a superuser connection of another role.
std::int64_t terminateBackends(pqxx::connection& admin, const std::string& role);

// The role of a "postgresql://ROLE@..." URL ("" when it names none).
std::string roleOfUrl(const std::string& url);

}  // namespace dlm::test::faults
