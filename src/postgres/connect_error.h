// What a failed connect attempt says: libpq hands out only a message at
// connect time (no PGresult for an authentication failure), so the store
// asks for verbose messages while connecting and reads the SQLSTATE from it.
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// SQLSTATEs of a refused login (the server's auth_failed and
// InitializeSessionUserId): a wrong password, and a login refused otherwise
// (no pg_hba.conf entry, role does not exist or may not log in, peer, ident,
// certificate ... authentication failed).
inline constexpr std::string_view kInvalidPasswordState = "28P01";
inline constexpr std::string_view kInvalidAuthorizationState = "28000";

struct ConnectError {
  // The SQLSTATE the last server that answered gave ("28P01"); "28P01" too
  // for libpq's own "no password supplied" (the server asked for a
  // password and none was set: PGPASSWORD, ~/.pgpass, password=); "" when
  // no server gave one (refused, unreachable, TLS failed).
  std::string sqlstate;
  // The message without the SQLSTATEs and the server's LOCATION lines that
  // verbose messages carry; may span lines.
  std::string message;
};

// Reads `verbose`, PQerrorMessage of a connection that failed with
// PQERRORS_VERBOSE set ("connection to server at ... failed: FATAL:  28P01:
// password authentication failed for user \"app\"\nLOCATION:  auth_failed,
// auth.c:334\n"; one such part per host or address tried). Independent of
// the server's lc_messages: it reads only the SQLSTATE field's place.
ConnectError parseConnectError(std::string_view verbose);

// Whether `sqlstate` (class 28, invalid authorization specification) means
// the server refused the login itself: retrying with the same settings
// cannot succeed.
bool isAuthenticationFailure(std::string_view sqlstate);

}  // namespace dlm::internal
