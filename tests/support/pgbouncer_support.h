// The PgBouncer that the test command starts in front of the throwaway
// cluster (scripts/pgbouncer.sh: transaction pooling, loopback, trust for
// the users in its auth file), as the tests reach it: through the variables
// DLM_TEST_PGBOUNCER_PORT and DLM_TEST_PGBOUNCER_AUTH_FILE.
#pragma once

#include <string>

namespace dlm::test {

// A libpq connection string to PgBouncer for `user` (database and the
// rest from PG*). Throws std::runtime_error when the variables are not set:
// a test that needs PgBouncer fails without it, it does not skip.
std::string pgbouncerConninfo(const std::string& user);

// The same as a dlm URL for openStore: pooler-safe, listening for releases
// on the server of the PG* variables.
std::string pgbouncerUrl(const std::string& user);

// Lets `role` log in through PgBouncer: adds it to the auth file and makes
// PgBouncer reload it (admin console, as PGUSER).
void allowThroughPgbouncer(const std::string& role);

}  // namespace dlm::test
