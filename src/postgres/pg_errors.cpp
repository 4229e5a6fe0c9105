#include "postgres/pg_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <pqxx/pqxx>
#include <string>

#include "schema/migration.h"
#include "postgres/connect_error.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {
namespace {

// pqxx messages end with a newline (and the server's may span lines).
std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) {
    if (c == '\n') c = ' ';
  }
  return out;
}

std::string firstMigrationFile() {
  const auto& migrations = postgresMigrations();
  return migrations.empty() ? std::string("V1__create_lock_tables.sql")
                            : std::string(migrations.front().file);
}

// libpqxx 6.4 leaves the SQLSTATE out of some of its exception classes;
// their class says which one it was.
std::string sqlStateOf(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e)) return "42501";
  if (dynamic_cast<const pqxx::disk_full*>(&e)) return "53100";
  if (dynamic_cast<const pqxx::out_of_memory*>(&e)) return "53200";
  if (dynamic_cast<const pqxx::insufficient_resources*>(&e)) return "53000";
  if (dynamic_cast<const pqxx::undefined_table*>(&e)) return "42P01";
  if (dynamic_cast<const pqxx::undefined_function*>(&e)) return "42883";
  return "";
}

DLMException fromSqlState(std::string_view context, const std::string& state,
                          std::string_view message) {
  const std::string text = redactSecrets(
      fmt::format("{}: {} (SQLSTATE {})", context, trimmed(message),
                  state.empty() ? std::string("unknown") : state));
  // 57014: the session's statement_timeout (the store's operationTimeout)
  // cut the call short, a server that does not answer in time. 25006: the
  // server is read-only, a standby or a primary being demoted in a
  // failover; the connection is dropped and the next one goes to the host
  // that is now the primary (target_session_attrs=read-write).
  if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" ||
      state == "57P03" || state == "53300" || state == "57014" ||
      state == "25006") {
    return DLMException(ErrorCode::CONNECTION_ERROR, text, true);
  }
  if (isAuthenticationFailure(state)) {
    // The server refused the login itself: the same settings will be
    // refused again, so it is not retried (not CONNECTION_ERROR).
    return DLMException(
        ErrorCode::PERMISSION_DENIED,
        fmt::format("{}; the server refused the login ({}): check the user "
                    "name, the password (PGPASSWORD, ~/.pgpass or the "
                    "connection string) and pg_hba.conf",
                    text,
                    state == kInvalidPasswordState ? "wrong or missing password"
                                                   : "authentication failed"));
  }
  if (state.rfind("40", 0) == 0 || state == "55P03") {
    return DLMException(ErrorCode::RETRIES_EXHAUSTED, text, true);
  }
  if (state == kLockNotHeldState) {
    // Raised by dlm_release_within: the lock was lost before commitLock.
    return DLMException(ErrorCode::LOCK_NOT_HELD, text);
  }
  if (state == "42501") {
    // The schema's tenancy check names the client and the role itself.
    if (text.find("dlm: client ") != std::string::npos) {
      return DLMException(ErrorCode::PERMISSION_DENIED, text);
    }
    // The store adds the roles that hold the privilege in this database
    // (privilege_hint.h): role names differ per service (docs/dba.md).
    return DLMException(ErrorCode::PERMISSION_DENIED, text);
  }
  if (state == "42P05" || state == "26000") {
    // A named prepared statement met on a server connection other than the
    // one it was prepared on: a pooler hands out server connections per
    // transaction.
    return DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("{}; a connection pooler in transaction mode (PgBouncer) "
                    "is between dlm and PostgreSQL: add dlm_pooler_safe=true "
                    "to the database URL (PostgresStoreOptions::poolerSafe), "
                    "which uses no named prepared statements",
                    text));
  }
  if (state == "22023") {
    // Refused by a dlm function: bad arguments, a TTL over the cap, a
    // hierarchy setting other than the client's recorded one.
    return DLMException(ErrorCode::INVALID_ARGUMENT, text);
  }
  if (state == "42P01" || state == "42883") {
    return DLMException(
        ErrorCode::SCHEMA_MISMATCH,
        fmt::format("{}; the dlm schema is missing or incomplete: apply "
                    "migrations/postgres/ from {} on, or run `dlmctl migrate`",
                    text, firstMigrationFile()));
  }
  return DLMException(ErrorCode::INTERNAL_ERROR, text);
}

}  // namespace

DLMException translatePgError(std::string_view context) {
  try {
    throw;
  } catch (const DLMException& e) {
    // Raised by the store itself (pool timeout, store closed, deadline):
    // keep the classification, add what was being done.
    return DLMException(e.code(),
                        redactSecrets(fmt::format("{}: {}", context, e.what())),
                        e.transient());
  } catch (const PgError& e) {
    // The store's own libpq connections. A refused login (class 28, read
    // from the connect message: connect_error.h) is no lost connection.
    if (e.connectionLost() && !isAuthenticationFailure(e.sqlstate()) && e.sqlstate().rfind("08", 0) != 0 &&
        e.sqlstate().rfind("57P0", 0) != 0) {
      // Lost for a reason the server did not name (or named oddly): still
      // a lost connection.
      return DLMException(
          ErrorCode::CONNECTION_ERROR,
          redactSecrets(fmt::format("{}: connection to PostgreSQL lost: {}",
                                    context, trimmed(e.what()))),
          true);
    }
    return fromSqlState(context, e.sqlstate(), e.what());
  } catch (const pqxx::broken_connection& e) {
    // libpqxx 6.4 throws this (no SQLSTATE) for class 08 and 53300 too.
    return DLMException(
        ErrorCode::CONNECTION_ERROR,
        redactSecrets(fmt::format("{}: connection to PostgreSQL failed: {}",
                                  context, trimmed(e.what()))),
        true);
  } catch (const pqxx::serialization_failure& e) {
    // libpqxx 6.4 reports class 40 as its own classes, without SQLSTATE.
    return fromSqlState(context, "40001", e.what());
  } catch (const pqxx::deadlock_detected& e) {
    return fromSqlState(context, "40P01", e.what());
  } catch (const pqxx::transaction_rollback& e) {
    return fromSqlState(context, "40000", e.what());
  } catch (const pqxx::sql_error& e) {
    return fromSqlState(context, sqlStateOf(e), e.what());
  } catch (const pqxx::in_doubt_error& e) {
    // Only a commit can be in doubt; never retried blindly (the caller
    // re-reads the row by its token to learn the outcome).
    return DLMException(
        ErrorCode::INTERNAL_ERROR,
        fmt::format("{}: outcome unknown, the connection broke during "
                    "commit: {}",
                    context, trimmed(e.what())));
  } catch (const std::exception& e) {
    // pqxx usage/conversion errors and the like: a bug, not a condition.
    return DLMException(
        ErrorCode::INTERNAL_ERROR,
        redactSecrets(fmt::format("{}: {}", context, trimmed(e.what()))));
  } catch (...) {
    // Nothing else should reach here, but the store never leaks a non-DLM
    // exception.
    return DLMException(ErrorCode::INTERNAL_ERROR,
                        fmt::format("{}: unknown exception", context));
  }
}

}  // namespace dlm::internal
