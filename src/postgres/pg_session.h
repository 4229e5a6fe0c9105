// How the PostgreSQL store opens its connections: the user's parameters plus
// bounded-time defaults, an application_name naming the store's clients, and
// the session settings every store connection gets.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/postgres_store.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {

// Keepalive defaults added where the user's conninfo sets none: a peer that
// vanished (host lost, no FIN/RST) is noticed within about
// idle + interval * count seconds, unacknowledged data within
// tcp_user_timeout.
inline constexpr const char* kKeepalivesIdleSeconds = "10";
inline constexpr const char* kKeepalivesIntervalSeconds = "3";
inline constexpr const char* kKeepalivesCount = "3";
inline constexpr const char* kTcpUserTimeoutMs = "15000";

// `base` + " " + the client ids joined by ",", cut to what the server keeps
// (63 bytes); bytes outside printable ASCII become '?'.
std::string applicationNameOf(std::string_view base,
                              const std::set<std::string>& clients);

// Thread-safe.
class PgSessions {
 public:
  // Parses options.connection: throws DLMException INVALID_ARGUMENT when
  // malformed.
  explicit PgSessions(const PostgresStoreOptions& options);

  // Names `clientId` in the application_name of connections opened later.
  void addClient(std::string_view clientId);
  std::string applicationName() const;

  // A connection with the defaults and application_name, nothing run on it.
  // Several hosts (host=a,b or postgresql://a,b/db, as HA formations are
  // reached) are tried one after the other, each within its share of the
  // time left (and within connect_timeout, if set), so a silent first host
  // does not use up the whole deadline: libpq's non-blocking connect would
  // wait on it forever and never move on by itself. A host that refuses the
  // login (class 28) ends it there, as in libpq: later hosts are not tried.
  std::unique_ptr<PgConn> open(Deadline deadline, int wakeFd = -1) const;
  // open() + one round trip of session settings: search_path (the
  // configured schema), lock_timeout (rowLockWait), statement_timeout
  // (operationTimeout), plan_cache_mode (PostgreSQL 12+).
  std::unique_ptr<PgConn> openForStore(Deadline deadline) const;

 private:
  const PostgresStoreOptions options_;
  const ConnParams params_;
  mutable std::mutex mu_;
  std::set<std::string> clients_;  // guarded by mu_
};

// The items of a libpq comma list ("a,b" -> {"a", "b"}; "" -> {""}), as
// multi-host connection strings give hosts, addresses and ports.
std::vector<std::string> splitCommas(const std::string& list);

}  // namespace dlm::internal
