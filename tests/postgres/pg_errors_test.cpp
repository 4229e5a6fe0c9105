// The one translation of driver errors, exception class by class (no server
// needed: the exceptions are made here).
#include "postgres/pg_errors.h"

#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

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
       {"08006", "08001", "57P01", "57P02", "57P03", "53300"}) {
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
  expectClass(
      translated(pqxx::insufficient_privilege("permission denied", "q")),
      ErrorCode::INTERNAL_ERROR, false, "SQLSTATE 42501");
  expectClass(translated(pqxx::in_doubt_error("commit in doubt")),
              ErrorCode::INTERNAL_ERROR, false, "outcome unknown");
  expectClass(translated(pqxx::conversion_error("bad int")),
              ErrorCode::INTERNAL_ERROR, false, "bad int");
  expectClass(translated(std::runtime_error("odd")), ErrorCode::INTERNAL_ERROR,
              false, "odd");
  expectClass(translated(42), ErrorCode::INTERNAL_ERROR, false, "unknown");
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

}  // namespace
}  // namespace dlm::test
