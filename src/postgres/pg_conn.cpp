#include "postgres/pg_conn.h"

#include <fmt/format.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <utility>

#include "dlm/error.h"
#include "postgres/connect_error.h"
#include "postgres/conninfo_text.h"
#include "postgres/pg_errors.h"
#include "common/redact.h"

namespace dlm::internal {
namespace {

// libpq's messages end with a newline and may span lines.
std::string oneLine(const char* message) {
  std::string s = message ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  return redactSecrets(s);
}

// poll()'s timeout for `deadline`: -1 (forever) for a saturated deadline.
int pollTimeout(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto left = timeLeft(deadline).count();
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

long long budgetMs(Deadline::duration budget) {
  return std::chrono::ceil<std::chrono::milliseconds>(budget).count();
}

}  // namespace

// ---------------------------------------------------------------- ConnParams

ConnParams ConnParams::parse(std::string_view conninfo) {
  const std::string text(conninfo);
  // Neither message quotes the string: it may hold a password where no
  // pattern finds it.
  if (uriUserInfoSpills(text)) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        "PostgreSQL store: malformed connection URI (not shown: it may hold "
        "a password): its user name or password holds a '/', '?' or '@' "
        "that is not percent-encoded; write '/' as %2F, '?' as %3F and '@' "
        "as %40");
  }
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(text.c_str(), &error);
  if (options == nullptr) {
    const std::string why =
        oneLine(maskQuotedValues(error ? error : "out of memory", text).c_str());
    if (error) PQfreemem(error);
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("PostgreSQL store: malformed connection string (not "
                    "shown: it may hold a password): {}",
                    why));
  }
  ConnParams params;
  // Only what the string set has a value; libpq fills the rest (PG*
  // variables, built-in defaults) when connecting.
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    params.known_.emplace(o->keyword);
    if (o->val != nullptr) params.items_.emplace_back(o->keyword, o->val);
  }
  PQconninfoFree(options);
  return params;
}

bool ConnParams::has(std::string_view keyword) const {
  for (const auto& item : items_) {
    if (item.first == keyword) return true;
  }
  // PGAPPNAME is the user's choice too; our default must not hide it.
  return keyword == "application_name" && std::getenv("PGAPPNAME") != nullptr;
}

void ConnParams::setDefault(std::string_view keyword, std::string value) {
  if (!has(keyword) && known_.count(keyword) != 0) {
    items_.emplace_back(keyword, std::move(value));
  }
}

std::string ConnParams::value(std::string_view keyword) const {
  for (const auto& item : items_) {
    if (item.first == keyword) return item.second;
  }
  return "";
}

void ConnParams::set(std::string_view keyword, std::string value) {
  for (auto& item : items_) {
    if (item.first == keyword) {
      item.second = std::move(value);
      return;
    }
  }
  items_.emplace_back(keyword, std::move(value));
}

// ------------------------------------------------------------------ PgResult

std::string PgResult::text(int row, int col) const {
  return std::string(PQgetvalue(r_.get(), row, col),
                     static_cast<std::size_t>(PQgetlength(r_.get(), row, col)));
}

std::int64_t PgResult::int64(int row, int col) const {
  if (isNull(row, col)) return 0;
  return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
}

bool PgResult::boolean(int row, int col) const {
  return !isNull(row, col) && PQgetvalue(r_.get(), row, col)[0] == 't';
}

// -------------------------------------------------------------------- PgConn

PgConn::PgConn(Key, Handle conn, int wakeFd)
    : conn_(std::move(conn)), wakeFd_(wakeFd) {}

PgConn::~PgConn() = default;

std::unique_ptr<PgConn> PgConn::open(const ConnParams& params,
                                     Deadline deadline, int wakeFd) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params.items()) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  const auto budget = deadline - std::chrono::steady_clock::now();
  // Non-blocking connect: PQconnectdb would wait on a silent server for as
  // long as connect_timeout says (forever by default).
  Handle raw(PQconnectStartParams(keys.data(), values.data(), 0));
  if (!raw) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "PostgreSQL: out of memory while connecting");
  }
  auto conn = std::make_unique<PgConn>(Key{}, std::move(raw), wakeFd);
  PGconn* c = conn->conn_.get();
  // libpq's default prints server notices (a WARNING before an immediate
  // shutdown, a FATAL on an idle connection) to stderr: a library must not.
  // Set before anything is read from the server (PQconnectStartParams only
  // starts the connect); the PgConn owns `c`, so it outlives the receiver's
  // calls.
  PQsetNoticeReceiver(c, &PgConn::receiveNotice, conn.get());
  // A refused connect leaves only PQerrorMessage, no PGresult: verbose
  // messages carry the server's SQLSTATE (28P01, a wrong password) in it,
  // whatever language the server speaks (connect_error.h).
  PQsetErrorVerbosity(c, PQERRORS_VERBOSE);
  if (PQstatus(c) == CONNECTION_BAD) conn->fail("connect");
  // libpq's protocol: act as if PGRES_POLLING_WRITING came first.
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  while (state != PGRES_POLLING_OK) {
    if (state == PGRES_POLLING_FAILED) conn->fail("connect");
    conn->waitFor(state == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline,
                  budget, "connecting");
    state = PQconnectPoll(c);
  }
  // Sends never block from here on: waits happen in poll() with a deadline.
  if (PQsetnonblocking(c, 1) != 0) conn->fail("connect");
  // Statement errors are read field by field (errorOf).
  PQsetErrorVerbosity(c, PQERRORS_DEFAULT);
  return conn;
}

void PgConn::fail(const char* what) {
  if (conn_ && std::string_view(what) == "connect" &&
      PQstatus(conn_.get()) == CONNECTION_BAD) {
    // 08001 (could not establish the connection) unless a server said why:
    // 28P01 / 28000 (login refused), 57P03 (starting up), 53300, 3D000 ...
    const ConnectError error = parseConnectError(PQerrorMessage(conn_.get()));
    conn_.reset();
    throw PgError(error.sqlstate.empty() ? "08001" : error.sqlstate,
                  fmt::format("{}: {}", what, oneLine(error.message.c_str())),
                  true);
  }
  const std::string message = fmt::format(
      "{}: {}", what,
      oneLine(conn_ ? PQerrorMessage(conn_.get()) : "connection closed"));
  const bool lost = !conn_ || PQstatus(conn_.get()) == CONNECTION_BAD;
  if (lost) conn_.reset();
  // 08006: the connection failed after it was made.
  throw PgError(lost ? "08006" : "", message, lost);
}

void PgConn::waitFor(short events, Deadline deadline, Deadline::duration budget,
                     const char* what) {
  for (;;) {
    pollfd fds[2] = {{PQsocket(conn_.get()), events, 0}, {wakeFd_, POLLIN, 0}};
    const int rc = ::poll(fds, wakeFd_ >= 0 ? 2 : 1, pollTimeout(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      conn_.reset();
      throw PgError("", fmt::format("{}: poll failed (errno {})", what, errno),
                    true);
    }
    if (rc > 0 && wakeFd_ >= 0 && (fds[1].revents & POLLIN)) {
      conn_.reset();
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         fmt::format("PostgreSQL: {}: interrupted", what));
    }
    if (rc > 0) return;  // ready, or an error libpq will report
    if (std::chrono::steady_clock::now() >= deadline) {
      // The server may be stalled mid-answer: the connection's state is
      // unknown, so it cannot be reused; PQcancel would block on it.
      conn_.reset();
      throw DLMException(
          ErrorCode::CONNECTION_ERROR,
          fmt::format("no answer from PostgreSQL within {} ms ({})",
                      budgetMs(budget), what),
          true);
    }
  }
}

// Push the whole query out; a full socket buffer means waiting for the
// server to read (and reading what it sends meanwhile).
void PgConn::flushAll(Deadline deadline, Deadline::duration budget) {
  PGconn* c = conn_.get();
  for (;;) {
    const int rc = PQflush(c);
    if (rc < 0) fail("sending");
    if (rc == 0) return;
    waitFor(POLLIN | POLLOUT, deadline, budget, "sending");
    if (PQconsumeInput(c) == 0) fail("sending");
  }
}

PgError PgConn::errorOf(PGconn* c, const PGresult* r) {
  const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  const bool lost = PQstatus(c) == CONNECTION_BAD;
  return PgError(state ? state : (lost ? "08006" : ""),
                 oneLine(primary ? primary : PQresultErrorMessage(r)), lost);
}

template <typename Send>
PgResult PgConn::roundTrip(Send&& send, Deadline deadline) {
  if (!conn_) {
    throw PgError("08003", "the connection was closed earlier", true);
  }
  const auto budget = deadline - std::chrono::steady_clock::now();
  PGconn* c = conn_.get();
  return keepingNoticesOfSuccess([&] {
    if (!send(c)) fail("sending");
    flushAll(deadline, budget);
    return readAnswer(deadline, budget, 0);
  });
}

PgResult PgConn::exec(const std::string& sql, Deadline deadline) {
  return roundTrip([&](PGconn* c) { return PQsendQuery(c, sql.c_str()); },
                   deadline);
}

PgResult PgConn::execParams(const std::string& sql,
                            const std::vector<const char*>& params,
                            Deadline deadline) {
  return roundTrip(
      [&](PGconn* c) {
        return PQsendQueryParams(c, sql.c_str(),
                                 static_cast<int>(params.size()), nullptr,
                                 params.data(), nullptr, nullptr, 0);
      },
      deadline);
}

void PgConn::sendSettingsWithEachCall(std::string sql,
                                      std::vector<std::string> values) {
  settingsSql_ = std::move(sql);
  settingValues_ = std::move(values);
}

PgResult PgConn::pipelined(const std::string& sql,
                           const std::vector<const char*>& params,
                           Deadline deadline) {
  if (!conn_) {
    throw PgError("08003", "the connection was closed earlier", true);
  }
  const auto budget = deadline - std::chrono::steady_clock::now();
  PGconn* c = conn_.get();
  std::vector<const char*> values;
  values.reserve(settingValues_.size());
  for (const auto& v : settingValues_) values.push_back(v.c_str());
  return keepingNoticesOfSuccess([&] {
    if (PQenterPipelineMode(c) != 1 ||
        PQsendQueryParams(c, settingsSql_.c_str(),
                          static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, 0) != 1 ||
        PQsendQueryParams(c, sql.c_str(), static_cast<int>(params.size()),
                          nullptr, params.data(), nullptr, nullptr, 0) != 1 ||
        PQpipelineSync(c) != 1) {
      fail("sending");
    }
    flushAll(deadline, budget);
    return readAnswer(deadline, budget, 2);
  });
}

PgResult PgConn::readAnswer(Deadline deadline, Deadline::duration budget,
                            int pipelined) {
  PGconn* c = conn_.get();
  int query = 0;  // pipelined: the query whose results come now
  PgResult kept;
  std::optional<PgError> error;
  for (;;) {
    while (PQisBusy(c) == 0) {
      PGresult* r = PQgetResult(c);
      if (r == nullptr) {
        if (pipelined == 0) {
          if (error) throw *error;
          return kept;
        }
        // A pipeline: the end of one query's results; the Sync's comes last.
        if (++query > pipelined) {
          // The answer broke off before its Sync: a transaction pooler
          // whose server connection died mid-call answers so. The call's
          // outcome is unknown and the connection out of step: dropped, and
          // reported as a lost connection (with the server's reason when
          // one came).
          conn_.reset();
          if (error) throw PgError(error->sqlstate(), error->what(), true);
          throw PgError("08006", "reading the answer: it broke off before "
                                 "its end (server connection lost)",
                        true);
        }
        continue;
      }
      PgResult result(r);
      const ExecStatusType status = PQresultStatus(r);
      if (status == PGRES_PIPELINE_SYNC) {
        if (PQexitPipelineMode(c) != 1) fail("leaving pipeline mode");
        if (error) throw *error;
        return kept;
      }
      if (status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR ||
          status == PGRES_BAD_RESPONSE) {
        if (!error) error.emplace(errorOf(c, r));
      } else if (status != PGRES_PIPELINE_ABORTED &&
                 (pipelined == 0 || query == pipelined - 1)) {
        kept = std::move(result);
      }
      if (PQstatus(c) == CONNECTION_BAD) {
        // libpq hands out the error result of a lost connection, then
        // nothing more.
        conn_.reset();
        if (error) throw PgError(error->sqlstate(), error->what(), true);
        throw PgError("08006", "connection lost", true);
      }
    }
    waitFor(POLLIN, deadline, budget, "waiting for the answer");
    if (PQconsumeInput(c) == 0) {
      // A terminated backend says why (57P01) before it hangs up: report
      // that rather than the hang-up.
      if (error && PQstatus(c) == CONNECTION_BAD) {
        conn_.reset();
        throw PgError(error->sqlstate(), error->what(), true);
      }
      fail("reading the answer");
    }
  }
}

PgResult PgConn::execPrepared(const PreparedStatement& statement,
                              const std::vector<const char*>& params,
                              Deadline deadline) {
  if (!settingsSql_.empty()) return pipelined(statement.sql, params, deadline);
  if (prepared_.count(statement.name) == 0) {
    // Parameter types are left to the server, as the SQL's casts say.
    roundTrip(
        [&](PGconn* c) {
          return PQsendPrepare(c, statement.name, statement.sql.c_str(), 0,
                               nullptr);
        },
        deadline);
    prepared_.insert(statement.name);
  }
  return roundTrip(
      [&](PGconn* c) {
        return PQsendQueryPrepared(c, statement.name,
                                   static_cast<int>(params.size()),
                                   params.data(), nullptr, nullptr, 0);
      },
      deadline);
}

bool PgConn::consumeInput() {
  if (!conn_) return false;
  if (PQconsumeInput(conn_.get()) == 0 ||
      PQstatus(conn_.get()) == CONNECTION_BAD) {
    conn_.reset();
    return false;
  }
  return true;
}

std::optional<std::string> PgConn::nextNotification() {
  if (!conn_) return std::nullopt;
  PGnotify* n = PQnotifies(conn_.get());
  if (n == nullptr) return std::nullopt;
  std::string payload = n->extra ? n->extra : "";
  PQfreemem(n);
  return payload;
}

void PgConn::keepNotices(std::string sqlstate) {
  keptSqlstate_ = std::move(sqlstate);
}

std::vector<PgNotice> PgConn::takeNotices() noexcept {
  return std::exchange(notices_, {});
}

void PgConn::dropNoticesAfter(std::size_t kept) noexcept {
  if (notices_.size() > kept) {
    notices_.erase(notices_.begin() + static_cast<std::ptrdiff_t>(kept),
                   notices_.end());
  }
}

void PgConn::receiveNotice(void* self, const PGresult* notice) noexcept {
  auto& conn = *static_cast<PgConn*>(self);
  if (conn.keptSqlstate_.empty()) return;
  const char* state = PQresultErrorField(notice, PG_DIAG_SQLSTATE);
  if (state == nullptr || conn.keptSqlstate_ != state) return;
  if (conn.notices_.size() >= kMaxKeptNotices) return;
  try {
    const char* primary = PQresultErrorField(notice, PG_DIAG_MESSAGE_PRIMARY);
    const char* hint = PQresultErrorField(notice, PG_DIAG_MESSAGE_HINT);
    conn.notices_.push_back(
        PgNotice{state, oneLine(primary), hint ? oneLine(hint) : ""});
  } catch (...) {
    // Out of memory: this notice is lost; nothing else is, and an exception
    // must not unwind through libpq.
  }
}

int PgConn::socket() const { return conn_ ? PQsocket(conn_.get()) : -1; }

bool PgConn::usable() const {
  return conn_ && PQstatus(conn_.get()) == CONNECTION_OK;
}

int PgConn::serverVersion() const {
  return conn_ ? PQserverVersion(conn_.get()) : 0;
}

std::string PgConn::quoteIdentifier(std::string_view name) const {
  if (!conn_) throw PgError("08003", "the connection was closed earlier", true);
  char* quoted = PQescapeIdentifier(conn_.get(), name.data(), name.size());
  if (quoted == nullptr) {
    throw PgError("", oneLine(PQerrorMessage(conn_.get())), false);
  }
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

}  // namespace dlm::internal
