// The PostgreSQL store's one translation from driver errors to DLMException.
#pragma once

#include <string>
#include <string_view>

#include "dlm/error.h"
// redactSecrets, which every message of translatePgError goes through.
#include "common/redact.h"

namespace dlm::internal {

// The SQLSTATE dlm_release_within raises when the releasing token no longer
// holds the row (schema/postgres.sql).
inline constexpr std::string_view kLockNotHeldState = "DLM01";

// Translates the exception being handled (call it only inside a catch
// block) into the DLMException the store throws. `context` says what was
// being done and on which key ("acquire DC#f#c#a.b"); it starts the message.
//
//   DLMException                       kept (code and transient), context added
//   PgError (libpq, the store's own    by its SQLSTATE as below; a lost
//     connections)                       connection is CONNECTION_ERROR
//   pqxx::broken_connection, SQLSTATE  CONNECTION_ERROR, transient
//     class 08, 57P01-57P03, 53300,
//     57014 (statement_timeout: the
//     server-side bound of a call)
//   serialization failure / deadlock   RETRIES_EXHAUSTED, transient
//     (40001, 40P01, class 40), lock not available (55P03)
//   DLM01 (dlm_release_within: the     LOCK_NOT_HELD
//     token no longer holds the row)
//   login refused (class 28: 28P01     PERMISSION_DENIED, not transient (a
//     wrong or missing password,         retry would be refused again)
//     28000 no pg_hba.conf entry, role
//     does not exist, ...)
//   insufficient privilege (42501)     PERMISSION_DENIED, naming the roles
//   undefined table / function         SCHEMA_MISMATCH, naming the migration
//     (42P01, 42883)                     and `dlmctl migrate`
//   anything else                      INTERNAL_ERROR, SQLSTATE in the message
//
// A CONNECTION_ERROR also means the connection is unusable: the pool drops it.
// Every message goes through redactSecrets.
DLMException translatePgError(std::string_view context);

}  // namespace dlm::internal
