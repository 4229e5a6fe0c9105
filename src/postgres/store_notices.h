// The server notices the PostgreSQL store reports to its warning listeners:
// a first-use binding (SQLSTATE DL001, schema 17), collected per store call
// and told once the call is over.
#pragma once

#include <string>
#include <vector>

#include "postgres/pg_conn.h"
#include "postgres/warning_listeners.h"

namespace dlm::internal {

// dlm_client_for raises it, once, in the call that bound a client at first
// use (docs/protocol.md).
inline constexpr const char* kFirstUseBindingState = "DL001";

// A notice as a warning: its message, then its hint after "; ".
std::string warningText(const PgNotice& notice);

// The notices of one store call. Declare it before the call's connection
// lease: it tells the listeners when destroyed, with the connection back in
// the pool, so a listener that calls the store holds none of its connections.
class CallNotices {
 public:
  explicit CallNotices(WarningListeners& listeners) noexcept
      : listeners_(listeners) {}
  // One warning per notice, in order; never throws.
  ~CallNotices();
  CallNotices(const CallNotices&) = delete;
  CallNotices& operator=(const CallNotices&) = delete;

  // call(), then (whether it returned or threw) takes what `conn` kept: a
  // failed statement's notices were dropped by PgConn, the others were
  // committed even when `call` failed later (reading the result).
  template <typename Call>
  auto around(PgConn& conn, Call&& call) {
    const Take take{*this, conn};
    return call();
  }

 private:
  struct Take {
    CallNotices& notices;
    PgConn& conn;
    ~Take() { notices.take(conn); }
  };
  void take(PgConn& conn) noexcept;

  WarningListeners& listeners_;  // borrowed; outlives this
  std::vector<PgNotice> notices_;
};

}  // namespace dlm::internal
