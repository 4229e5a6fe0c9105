#include "postgres/pg_statements.h"

#include <fmt/format.h>

namespace dlm::internal {
namespace {

// Columns of a LockRecord, times as epoch milliseconds by the server clock.
constexpr const char* kRecordColumns =
    "resource, status = 'HELD', "
    "status = 'HELD' AND expires_at > clock_timestamp(), owner_id, "
    "fencing_token, floor(extract(epoch FROM acquired_at) * 1000)::bigint, "
    "floor(extract(epoch FROM expires_at) * 1000)::bigint, ttl_ms, "
    "holder_host, holder_pid, host(holder_ip)";

// Columns of a WaitRecord, times as epoch milliseconds by the server clock.
constexpr const char* kWaitColumns =
    "resource, owner_id, "
    "floor(extract(epoch FROM requested_at) * 1000)::bigint, "
    "floor(extract(epoch FROM expires_at) * 1000)::bigint";

}  // namespace

const PgStatements& pgStatements() {
  static const PgStatements kStatements{
      // The whole acquire transaction, server side (hierarchy protocol).
      {"dlm_acquire",
       "SELECT acquired, fencing_token, acquired_at_ms, expires_at_ms, "
       "blocked_by FROM dlm_acquire($1::text[], $2::bigint[], $3, $4, $5, $6, "
       "$7, $8, $9)"},
      // Token-conditional release, committed lazily; NOTIFYs when someone
      // waits (see the function).
      {"dlm_release", "SELECT dlm_release($1, $2, $3::text[], $4, $5)"},
      // Deadlock check + request row, serialised server side. One row per
      // key of the cycle, in order (none when registered), so no array
      // literal has to be parsed.
      {"dlm_register_wait",
       "SELECT u.k FROM unnest(dlm_register_wait($1, $2::text[], $3, $4, $5, "
       "$6)) WITH ORDINALITY AS u (k, i) ORDER BY u.i"},
      {"dlm_unregister_wait", "SELECT dlm_unregister_wait($1, $2)"},
      // Where dlm_release_within lives, for calling it schema-qualified on
      // the application's connection when no schema was configured.
      {"dlm_function_schema",
       "SELECT n.nspname FROM pg_catalog.pg_proc p JOIN pg_catalog."
       "pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = "
       "to_regprocedure('dlm_release_within(text, text, text[], text, "
       "text)')"},
      // Token-conditional lease extension.
      {"dlm_extend", "SELECT dlm_extend($1, $2, $3)"},
      // Operator override.
      {"dlm_force_release", "SELECT dlm_force_release($1)"},
      // One row by primary key; intention-only rows (never acquired,
      // fencing_token 0) count as "never locked".
      {"dlm_describe",
       fmt::format("SELECT {} FROM dlm_locks WHERE resource = $1 AND "
                   "fencing_token > 0",
                   kRecordColumns)},
      // Held rows under a prefix: primary-key range scan, then the exact
      // prefix test.
      {"dlm_list_held_range",
       fmt::format("SELECT {} FROM dlm_locks WHERE status = 'HELD' AND "
                   "resource >= $1 AND resource < $2 AND "
                   "starts_with(resource, $1) ORDER BY resource",
                   kRecordColumns)},
      // The same without an upper bound (empty or non-ASCII prefix).
      {"dlm_list_held_from",
       fmt::format("SELECT {} FROM dlm_locks WHERE status = 'HELD' AND "
                   "resource >= $1 AND starts_with(resource, $1) "
                   "ORDER BY resource",
                   kRecordColumns)},
      // Live request rows under a prefix: primary-key range scan (resource
      // is its first column), then the exact prefix test. A row past its
      // expiry (or without one) no longer counts, as in the wait graph.
      {"dlm_list_waiters_range",
       fmt::format("SELECT {} FROM dlm_lock_requests WHERE expires_at > "
                   "clock_timestamp() AND resource >= $1 AND resource < $2 "
                   "AND starts_with(resource, $1) "
                   "ORDER BY resource, requested_at, owner_id",
                   kWaitColumns)},
      // The same without an upper bound (empty or non-ASCII prefix).
      {"dlm_list_waiters_from",
       fmt::format("SELECT {} FROM dlm_lock_requests WHERE expires_at > "
                   "clock_timestamp() AND resource >= $1 AND "
                   "starts_with(resource, $1) "
                   "ORDER BY resource, requested_at, owner_id",
                   kWaitColumns)},
      // Every version row for operators, applied_at as UTC ISO-8601 with
      // milliseconds (independent of the session's TimeZone and DateStyle).
      {"dlm_schema_versions",
       "SELECT version, description, to_char(applied_at AT TIME ZONE 'UTC', "
       "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM dlm_schema_version "
       "ORDER BY version"},
      // The database clock.
      {"dlm_now",
       "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"},
      // The schema version initialize() checks.
      {"dlm_version", "SELECT max(version) FROM dlm_schema_version"},
  };
  return kStatements;
}

}  // namespace dlm::internal
