// A thin RAII layer over libpq for the store's own connections: connecting
// and running statements with a deadline (libpqxx 6.4 blocks without bound).
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlm/deadline.h"

namespace dlm::internal {

// A failure libpq or the server reported. `sqlstate` is the server's
// SQLSTATE (empty when libpq failed on its own); `connectionLost` says the
// connection is unusable afterwards. Translated by translatePgError.
class PgError : public std::runtime_error {
 public:
  PgError(std::string sqlstate, const std::string& message, bool connectionLost)
      : std::runtime_error(message),
        sqlstate_(std::move(sqlstate)),
        connectionLost_(connectionLost) {}
  const std::string& sqlstate() const { return sqlstate_; }
  bool connectionLost() const { return connectionLost_; }

 private:
  std::string sqlstate_;
  bool connectionLost_;
};

// Connection parameters as libpq keywords, from a user's conninfo string or
// URI plus defaults the user did not set.
class ConnParams {
 public:
  // Parses `conninfo` (keyword string or URI; "" = nothing set, libpq then
  // reads the PG* variables when connecting). Throws DLMException
  // INVALID_ARGUMENT (password redacted) when libpq cannot parse it.
  static ConnParams parse(std::string_view conninfo);

  // Whether the user set `keyword` (in the string, or for
  // application_name through PGAPPNAME).
  bool has(std::string_view keyword) const;
  // Sets `keyword` unless the user set it, or this libpq does not know it
  // (tcp_user_timeout is libpq 12+): a default must never fail a connect.
  void setDefault(std::string_view keyword, std::string value);
  // Sets `keyword`, replacing what was there.
  void set(std::string_view keyword, std::string value);

  const std::vector<std::pair<std::string, std::string>>& items() const {
    return items_;
  }
  // The value the user set for `keyword`, "" when none.
  std::string value(std::string_view keyword) const;

 private:
  std::vector<std::pair<std::string, std::string>> items_;
  std::set<std::string, std::less<>> known_;  // every keyword libpq knows
};

// Owns a PGresult.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* r) : r_(r) {}

  int rows() const { return r_ ? PQntuples(r_.get()) : 0; }
  int columns() const { return r_ ? PQnfields(r_.get()) : 0; }
  bool isNull(int row, int col) const {
    return PQgetisnull(r_.get(), row, col) != 0;
  }
  std::string text(int row, int col) const;
  // NULL reads as 0 / false / "": callers check isNull where it matters.
  std::int64_t int64(int row, int col) const;
  bool boolean(int row, int col) const;
  // The result itself (nullptr when libpq made none), still owned here.
  const PGresult* get() const { return r_.get(); }

 private:
  struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> r_;
};

// A notice the server sent (RAISE NOTICE and the like), as PgConn keeps it.
struct PgNotice {
  std::string sqlstate;
  std::string message;  // the primary message, on one line
  std::string hint;     // on one line; "" when none
};

// A statement prepared lazily, once per connection, under `name`.
struct PreparedStatement {
  const char* name;
  std::string sql;
};

// One libpq connection in non-blocking mode. Not thread-safe: one thread
// at a time. Every call that waits for the server takes a deadline; when it
// passes, the connection is closed (never PQcancel: it blocks on a stalled
// server) and the call throws DLMException CONNECTION_ERROR (transient).
// Other failures throw PgError.
class PgConn {
 public:
  // Closes a PGconn (PQfinish: sends Terminate without waiting).
  struct Finish {
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };

  // Connects with PQconnectStartParams/PQconnectPoll until `deadline`.
  // Limitation: libpq resolves a host name (host=, not hostaddr=) inside
  // PQconnectStartParams with the system resolver, which may block for the
  // resolver's own timeout; everything after that is bounded.
  // `wakeFd` (optional): a descriptor whose readability aborts the wait
  // (DLMException INTERNAL_ERROR "interrupted"), so a thread can be stopped
  // while it connects.
  static std::unique_ptr<PgConn> open(const ConnParams& params,
                                      Deadline deadline, int wakeFd = -1);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // A simple query (may hold several statements; the last result, or the
  // first error, is returned / thrown).
  PgResult exec(const std::string& sql, Deadline deadline);
  // One statement with text parameters (nullptr = NULL), unnamed.
  PgResult execParams(const std::string& sql,
                      const std::vector<const char*>& params,
                      Deadline deadline);
  // A prepared statement, prepared on this connection first if needed (one
  // more round trip, once).
  PgResult execPrepared(const PreparedStatement& statement,
                        const std::vector<const char*>& params,
                        Deadline deadline);

  // Pooler-safe mode (PgBouncer in transaction pooling): from now on
  // execPrepared sends `sql` with `values` and then its statement, both
  // unnamed, in one pipeline closed by one Sync. The two run in one implicit
  // transaction on whichever server connection the pooler lends, so
  // settings made with set_config(..., true) in `sql` hold for that
  // statement only, and no named statement or session setting is left on
  // the server connection. Still one round trip.
  void sendSettingsWithEachCall(std::string sql,
                                std::vector<std::string> values);

  // Reads what the socket has without waiting; false when the connection
  // broke. Then nextNotification() hands out what arrived.
  bool consumeInput();
  // The payload of the next received NOTIFY, if any.
  std::optional<std::string> nextNotification();

  // From now on keeps the notices whose SQLSTATE is `sqlstate` for
  // takeNotices() (at most kMaxKeptNotices until taken; later ones are
  // lost). Every other notice is dropped, as all are by default: a library
  // must not print. A notice of a call that then failed is dropped too: in
  // autocommit its transaction rolled back what the notice said was done.
  void keepNotices(std::string sqlstate);
  // The notices kept so far, oldest first; they are no longer kept.
  std::vector<PgNotice> takeNotices() noexcept;
  static constexpr std::size_t kMaxKeptNotices = 16;

  // The socket to poll(), -1 when closed.
  int socket() const;
  // False once the connection broke, timed out or was closed.
  bool usable() const;
  int serverVersion() const;
  // `name` quoted as an SQL identifier.
  std::string quoteIdentifier(std::string_view name) const;

  // The error result `r` of a statement on `c` (any connection: the
  // application's too), as PgError: its SQLSTATE, its primary message on
  // one line, whether `c` is lost.
  static PgError errorOf(PGconn* c, const PGresult* r);

 private:
  // Only open() makes connections (a passkey, so make_unique can).
  struct Key {
    explicit Key() = default;
  };

 public:
  using Handle = std::unique_ptr<PGconn, Finish>;
  PgConn(Key, Handle conn, int wakeFd);

 private:
  template <typename Send>
  PgResult roundTrip(Send&& send, Deadline deadline);
  // The settings statement and `sql` in one pipeline (see
  // sendSettingsWithEachCall); the result of `sql`.
  PgResult pipelined(const std::string& sql,
                     const std::vector<const char*>& params, Deadline deadline);
  // Reads the answer to what was sent: a plain query's (its last result),
  // or a pipeline of `pipelined` queries closed by a Sync (the last query's
  // result). The first error is thrown once everything was read.
  PgResult readAnswer(Deadline deadline, Deadline::duration budget,
                      int pipelined);
  // PQflush until everything is sent (reading meanwhile).
  void flushAll(Deadline deadline, Deadline::duration budget);
  // Waits for `events` on the socket; throws on timeout or wake-up.
  void waitFor(short events, Deadline deadline, Deadline::duration budget,
               const char* what);
  [[noreturn]] void fail(const char* what);
  // libpq's notice receiver, `self` the PgConn (which owns the PGconn, so
  // outlives every call of it). Runs inside libpq calls on the calling
  // thread; never throws.
  static void receiveNotice(void* self, const PGresult* notice) noexcept;
  // Runs `call` (one call to the server: a plain query, or a pipeline that
  // is one implicit transaction) and returns its result; when it throws,
  // the notices it brought are dropped: it rolled back, or its outcome is
  // unknown, so they may not be true.
  template <typename Call>
  PgResult keepingNoticesOfSuccess(Call&& call) {
    const std::size_t kept = notices_.size();
    try {
      return call();
    } catch (...) {
      dropNoticesAfter(kept);
      throw;
    }
  }
  // Drops the notices kept after the first `kept` (a failed call's).
  void dropNoticesAfter(std::size_t kept) noexcept;

  Handle conn_;
  int wakeFd_;
  std::set<std::string> prepared_;
  std::string settingsSql_;  // empty: named prepared statements
  std::vector<std::string> settingValues_;
  std::string keptSqlstate_;  // empty: every notice is dropped
  std::vector<PgNotice> notices_;
};

}  // namespace dlm::internal
