// The one translation of driver errors, exception class by class (no server
// needed: the exceptions are made here).
#include "postgres/pg_errors.h"

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

#include "postgres/pg_conn.h"

namespace dlm::test {
namespace {

template <typename E>
DLMException translated(const E& thrown) {
  try {
    throw thrown;
  } catch (...) {
    return internal::translatePgError("acquire K#x");
  }
}

void expectClass(const DLMException& e, ErrorCode code, bool transient,
                 const std::string& mentions) {
  EXPECT_EQ(e.code(), code) << e.what();
  EXPECT_EQ(e.transient(), transient) << e.what();
  const std::string what = e.what();
  EXPECT_EQ(what.rfind("acquire K#x: ", 0), 0u) << "context first: " << what;
  EXPECT_NE(what.find(mentions), std::string::npos) << what;
}

TEST(TranslatePgError, LostConnectionsAreTransientConnectionErrors) {
  expectClass(
      translated(pqxx::broken_connection("server closed the connection")),
      ErrorCode::CONNECTION_ERROR, true, "server closed");
  expectClass(translated(pqxx::too_many_connections("too many clients")),
              ErrorCode::CONNECTION_ERROR, true, "too many");
  for (const char* state :
       {"08006", "08001", "57P01", "57P02", "57P03", "53300", "25006"}) {
    expectClass(translated(pqxx::sql_error("gone", "SELECT 1", state)),
                ErrorCode::CONNECTION_ERROR, true, state);
  }
}

TEST(TranslatePgError, SerializationDeadlockAndLockTimeoutAreTransientRetries) {
  expectClass(translated(pqxx::serialization_failure("could not serialize")),
              ErrorCode::RETRIES_EXHAUSTED, true, "40001");
  expectClass(translated(pqxx::deadlock_detected("deadlock detected")),
              ErrorCode::RETRIES_EXHAUSTED, true, "40P01");
  expectClass(translated(pqxx::sql_error("lock timeout", "q", "55P03")),
              ErrorCode::RETRIES_EXHAUSTED, true, "55P03");
  expectClass(translated(pqxx::sql_error("serialize", "q", "40001")),
              ErrorCode::RETRIES_EXHAUSTED, true, "40001");
}

TEST(TranslatePgError,
     MissingTableOrFunctionIsSchemaMismatchNamingTheMigration) {
  for (const char* state : {"42P01", "42883"}) {
    const DLMException e =
        translated(pqxx::sql_error("relation does not exist", "q", state));
    expectClass(e, ErrorCode::SCHEMA_MISMATCH, false, state);
    EXPECT_NE(std::string(e.what()).find("V1__create_lock_tables.sql"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("dlmctl migrate"), std::string::npos);
  }
  expectClass(translated(pqxx::undefined_function("no function", "q", "42883")),
              ErrorCode::SCHEMA_MISMATCH, false, "42883");
}

TEST(TranslatePgError, EverythingElseIsInternalWithTheSqlState) {
  expectClass(translated(pqxx::sql_error("duplicate key", "q", "23505")),
              ErrorCode::INTERNAL_ERROR, false, "SQLSTATE 23505");
  expectClass(translated(pqxx::in_doubt_error("commit in doubt")),
              ErrorCode::INTERNAL_ERROR, false, "outcome unknown");
  expectClass(translated(pqxx::conversion_error("bad int")),
              ErrorCode::INTERNAL_ERROR, false, "bad int");
  expectClass(translated(std::runtime_error("odd")), ErrorCode::INTERNAL_ERROR,
              false, "odd");
  expectClass(translated(42), ErrorCode::INTERNAL_ERROR, false, "unknown");
}

TEST(TranslatePgError, EveryPermissionDenialIsPermissionDenied) {
  const DLMException e =
      translated(pqxx::insufficient_privilege("permission denied", "q"));
  expectClass(e, ErrorCode::PERMISSION_DENIED, false, "SQLSTATE 42501");
  // No role is named from here: the names differ per schema (the store
  // reads them from the catalog, pg_least_privilege_test).
  EXPECT_EQ(std::string(e.what()).find("dlm_client"), std::string::npos)
      << e.what();
  const DLMException admin = translated(internal::PgError(
      "42501", "permission denied for function dlm_purge", false));
  expectClass(admin, ErrorCode::PERMISSION_DENIED, false, "dlm_purge");
  EXPECT_EQ(std::string(admin.what()).find("dlm_admin"), std::string::npos)
      << admin.what();
}

// PgBouncer in transaction mode without dlm_pooler_safe: the named prepared
// statements meet other server connections. The message names the setting.
TEST(TranslatePgError, APoolerWithoutPoolerSafeNamesTheParameter) {
  for (const char* state : {"42P05", "26000"}) {
    const DLMException e = translated(internal::PgError(
        state, "prepared statement \"dlm_acquire\" already exists", false));
    expectClass(e, ErrorCode::INVALID_ARGUMENT, false, "dlm_pooler_safe=true");
  }
}

TEST(TranslatePgError, LockLostInReleaseWithinIsLockNotHeld) {
  expectClass(
      translated(pqxx::sql_error("lock k is no longer held", "q", "DLM01")),
      ErrorCode::LOCK_NOT_HELD, false, "SQLSTATE DLM01");
}

TEST(TranslatePgError, KeepsTheClassOfTheStoresOwnErrors) {
  expectClass(
      translated(DLMException(ErrorCode::CONNECTION_ERROR, "pool empty", true)),
      ErrorCode::CONNECTION_ERROR, true, "pool empty");
  expectClass(
      translated(DLMException(ErrorCode::INTERNAL_ERROR, "store closed")),
      ErrorCode::INTERNAL_ERROR, false, "store closed");
}

TEST(TranslatePgError, LibpqErrorsAreClassifiedBySqlState) {
  using internal::PgError;
  expectClass(translated(PgError("57P01", "terminating connection", true)),
              ErrorCode::CONNECTION_ERROR, true, "57P01");
  expectClass(
      translated(PgError("08006", "server closed the connection", true)),
      ErrorCode::CONNECTION_ERROR, true, "server closed");
  // Lost without a connection-class SQLSTATE: still a lost connection.
  expectClass(translated(PgError("", "poll failed", true)),
              ErrorCode::CONNECTION_ERROR, true, "poll failed");
  // statement_timeout: the server-side bound of the call.
  expectClass(translated(PgError("57014", "canceling statement", false)),
              ErrorCode::CONNECTION_ERROR, true, "57014");
  expectClass(translated(PgError("40P01", "deadlock detected", false)),
              ErrorCode::RETRIES_EXHAUSTED, true, "40P01");
  expectClass(translated(PgError("55P03", "lock timeout", false)),
              ErrorCode::RETRIES_EXHAUSTED, true, "55P03");
  expectClass(translated(PgError("DLM01", "lock lost", false)),
              ErrorCode::LOCK_NOT_HELD, false, "DLM01");
  expectClass(translated(PgError("42883", "no function", false)),
              ErrorCode::SCHEMA_MISMATCH, false, "dlmctl migrate");
  expectClass(translated(PgError("23505", "duplicate", false)),
              ErrorCode::INTERNAL_ERROR, false, "SQLSTATE 23505");
}

TEST(TranslatePgError, RedactsPasswordsFromEveryMessage) {
  const DLMException e = translated(internal::PgError(
      "08001", "could not connect: password=hunter2 postgresql://u:pw2@h",
      true));
  const std::string what = e.what();
  EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
  EXPECT_EQ(what.find("pw2"), std::string::npos) << what;
  const DLMException e2 = translated(
      DLMException(ErrorCode::CONNECTION_ERROR, "password='a b'", true));
  EXPECT_EQ(std::string(e2.what()).find("a b"), std::string::npos) << e2.what();
}

}  // namespace
}  // namespace dlm::test
