#include "postgres/pg_statements.h"

#include <fmt/format.h>

namespace dlm::internal {
namespace {

// Columns of a LockRecord as dlm_describe and dlm_holders return them
// (times as epoch milliseconds by the server clock; never the token), the
// login last (schema 17 on; NULL unless the caller is in the admin role).
constexpr const char* kRecordColumns =
    "resource, status_held, held, owner_id, fencing_token, acquired_at_ms, "
    "expires_at_ms, ttl_ms, holder_host, holder_pid, holder_ip, login";
// dlm_holders adds the mode before the login.
constexpr const char* kHoldColumns =
    "resource, status_held, held, owner_id, fencing_token, acquired_at_ms, "
    "expires_at_ms, ttl_ms, holder_host, holder_pid, holder_ip, shared, login";

}  // namespace

const PgStatements& pgStatements() {
  static const PgStatements kStatements{
      // The whole acquire transaction, server side (hierarchy protocol,
      // modes, fair queueing); one row of OUT parameters.
      {"dlm_try_acquire",
       "SELECT acquired, fencing_token, acquired_at_ms, expires_at_ms, "
       "blocked_by, queued FROM dlm_try_acquire($1::text[], $2::bigint[], $3, "
       "$4, $5, $6, $7, $8, $9, $10::boolean)"},
      // Token-conditional release, committed lazily; NOTIFYs when someone
      // waits (see the function).
      {"dlm_release", "SELECT dlm_release($1, $2, $3::text[], $4, $5)"},
      {"dlm_release_shared",
       "SELECT dlm_release_shared($1, $2, $3::text[], $4, $5)"},
      // Request row (or its renewal) + deadlock check. One row per key of
      // the cycle, in order (none when registered), so no array literal
      // has to be parsed. $8: the waiter's own deadline, in ms from now
      // (schema 18; NULL: none).
      {"dlm_register_wait",
       "SELECT u.k FROM unnest(dlm_register_wait($1, $2::text[], $3, $4, $5, "
       "$6, $7::boolean, $8::bigint)) WITH ORDINALITY AS u (k, i) ORDER BY "
       "u.i"},
      {"dlm_unregister_wait", "SELECT dlm_unregister_wait($1, $2)"},
      // The deadlock check again, after the registration committed.
      {"dlm_wait_cycle",
       "SELECT u.k FROM unnest(dlm_wait_cycle($1, $2)) WITH ORDINALITY AS u "
       "(k, i) ORDER BY u.i"},
      // The hints of a waited key and its ancestors, to match release
      // notifications with (schema 14 on), one row each, the key's first.
      {"dlm_release_hints",
       "SELECT u.h FROM unnest(dlm_release_hints($1)) WITH ORDINALITY AS u "
       "(h, i) ORDER BY u.i"},
      // Where dlm_release_within lives, for calling it schema-qualified on
      // the application's connection when no schema was configured.
      {"dlm_function_schema",
       "SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog."
       "pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = "
       "to_regprocedure('dlm_release_within(text, text, text[], text, "
       "text)')"},
      // Token-conditional lease extension.
      {"dlm_extend", "SELECT dlm_extend($1, $2, $3)"},
      {"dlm_extend_shared", "SELECT dlm_extend_shared($1, $2, $3)"},
      // Operator override.
      {"dlm_force_release", "SELECT dlm_force_release($1)"},
      // One row by primary key, through the definer function (the
      // application role reads no table); intention-only rows count as
      // "never locked".
      {"dlm_describe",
       fmt::format("SELECT {} FROM dlm_describe($1)", kRecordColumns)},
      // Holds of both modes of one key, and under a prefix (primary-key
      // lookups and range scans).
      {"dlm_holders_of",
       fmt::format("SELECT {} FROM dlm_holders($1, true)", kHoldColumns)},
      {"dlm_list_holds",
       fmt::format("SELECT {} FROM dlm_holders($1, false)", kHoldColumns)},
      // Live request rows under a prefix, key order then oldest first;
      // wait_until_ms: the waiter's own deadline (schema 18).
      {"dlm_list_requests",
       "SELECT resource, owner_id, requested_at_ms, expires_at_ms, shared, "
       "login, wait_until_ms FROM dlm_list_requests($1)"},
      // Every version row (schema 3 on), applied_at as UTC ISO-8601 with
      // milliseconds, through the definer function.
      {"dlm_schema_versions",
       "SELECT version, description, applied_at, checksum, compatible_from "
       "FROM dlm_schema_versions()"},
      // The same from the table, for schemas older than 3 (no function, no
      // checksum or compatibility columns), read by roles that still have
      // SELECT on it there.
      {"dlm_schema_versions_v1",
       "SELECT version, description, to_char(applied_at AT TIME ZONE 'UTC', "
       "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), NULL::bigint, NULL::integer "
       "FROM dlm_schema_version ORDER BY version"},
      // Admin: one purge batch (see the function).
      {"dlm_purge", "SELECT rows, fencing_floor FROM dlm_purge($1, $2, $3)"},
      // Admin: deletes a key's request rows (all, or one owner's as the
      // listings show it) and wakes the key's other waiters.
      {"dlm_cancel_requests", "SELECT dlm_cancel_requests($1, $2)"},
      // Client bindings: readable by the client role; binding and unbinding
      // are admin calls. Listed in byte order, whatever the collation.
      {"dlm_list_clients",
       "SELECT client_id, role_name, first_use, bound_by, bound_at_ms, "
       "separator, hierarchy FROM dlm_list_clients() "
       "ORDER BY client_id COLLATE \"C\""},
      {"dlm_bind_client", "SELECT dlm_bind_client($1, $2)"},
      {"dlm_unbind_client", "SELECT dlm_unbind_client($1)"},
      // Admin (schema 17 on): ends a client's holds and requests, forgets
      // its hierarchy setting; one row of counts.
      {"dlm_purge_client",
       "SELECT holds, shared_holds, requests FROM dlm_purge_client($1)"},
      // Admin (schema 17 on): binds a client to a role and ends the holds
      // and requests of logins outside it, in one transaction.
      {"dlm_rebind_client",
       "SELECT holds, shared_holds, requests FROM dlm_rebind_client($1, $2)"},
      // The database clock.
      {"dlm_now",
       "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"},
      // Batches (schema 19): one row per request, in order (ord, 1-based).
      {"dlm_try_acquire_each",
       "SELECT ord, outcome, fencing_token, acquired_at_ms, expires_at_ms "
       "FROM dlm_try_acquire_each($1::text[], $2::text[], $3::text[], "
       "$4::text[], $5::text[], $6::bigint[], $7, $8::bigint)"},
      {"dlm_release_each",
       "SELECT ord, outcome FROM dlm_release_each($1::text[], $2::text[], "
       "$3::text[])"},
      {"dlm_extend_each",
       "SELECT ord, outcome, expires_at_ms FROM dlm_extend_each($1::text[], "
       "$2::text[], $3::bigint[])"},
      {"dlm_try_acquire_all",
       "SELECT ord, acquired, fencing_token, acquired_at_ms, expires_at_ms, "
       "blocked_by, queued FROM dlm_try_acquire_all($1::text[], $2::text[], "
       "$3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], "
       "$8::boolean[], $9, $10::bigint)"},
  };
  return kStatements;
}

}  // namespace dlm::internal
