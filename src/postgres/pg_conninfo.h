// What openStore needs to know about a libpq connection string, without
// libpq in the caller (src/store_url.cpp is core code; only src/postgres/
// includes libpq-fe.h).
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// Checks `conninfo` (keyword string or URI) with libpq's own parser
// (PQconninfoParse), so that dlm accepts exactly what libpq accepts.
// Throws DLMException INVALID_ARGUMENT (password redacted) when libpq
// cannot parse it.
void checkConninfo(std::string_view conninfo);

// Where `conninfo` leads, as a URI for messages:
// "postgresql://user@host:port/dbname". What the string leaves out comes
// from libpq's defaults (PGHOST, PGUSER, PGSERVICE, ...), the way libpq
// fills it in when connecting. Never contains a password. Throws like
// checkConninfo.
std::string describeConninfo(std::string_view conninfo);

// Whether `conninfo` itself carries a password (password=..., or the
// user:password@ of a URI). Throws like checkConninfo.
bool conninfoHasPassword(std::string_view conninfo);

// Throws DLMException INVALID_ARGUMENT naming `what` when a host name of
// `conninfo` (its host list; not hostaddr, not a socket directory) is one
// the resolver says does not exist. A resolver that cannot answer now is
// not a refusal. For the LISTEN connection, whose failure would otherwise
// only cost wake-ups.
void requireResolvableHosts(std::string_view conninfo, std::string_view what);

}  // namespace dlm::internal
