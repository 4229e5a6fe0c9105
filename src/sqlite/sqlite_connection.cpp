#include "sqlite/sqlite_connection.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "dlm/deadline.h"
#include "dlm/error.h"

namespace dlm::internal::sqlite {

void DatabaseCloser::operator()(sqlite3* db) const noexcept {
  // close_v2 cannot fail with SQLITE_BUSY on unfinalized statements; the
  // statement cache is destroyed first anyway.
  sqlite3_close_v2(db);
}

void StatementFinalizer::operator()(sqlite3_stmt* stmt) const noexcept {
  sqlite3_finalize(stmt);
}

void throwError(sqlite3* db, std::string_view path, int rc,
                std::string_view what, std::string_view waitNote) {
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const std::string detail =
      fmt::format("sqlite store '{}': {} failed: {} (SQLite code {}: {})", path,
                  what, message, rc, sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
      // Another connection kept the write lock past the busy timeout or the
      // call's deadline; the manager may retry the whole call (within its
      // own deadline).
      throw DLMException(
          ErrorCode::RETRIES_EXHAUSTED,
          waitNote.empty() ? detail : fmt::format("{}; {}", detail, waitNote),
          /*transient=*/true);
    case SQLITE_CANTOPEN:
      // A missing directory or a permission problem does not go away within
      // a retry's backoff.
      throw DLMException(ErrorCode::CONNECTION_ERROR, detail);
    case SQLITE_IOERR:
    case SQLITE_FULL:
      // An I/O error may be passing (e.g. a file system hiccup), and a full
      // disk may get space back; every store call is safe to repeat.
      throw DLMException(ErrorCode::CONNECTION_ERROR, detail,
                         /*transient=*/true);
    case SQLITE_READONLY:
      // The file (or its directory, or the file system) cannot be written:
      // the store is unusable for changes until someone fixes that.
      throw DLMException(ErrorCode::CONNECTION_ERROR, detail);
    case SQLITE_PERM:
    case SQLITE_AUTH:
      throw DLMException(ErrorCode::PERMISSION_DENIED, detail);
    default:
      break;
  }
  if (std::string_view(message).find("no such table") !=
      std::string_view::npos) {
    throw DLMException(
        ErrorCode::SCHEMA_MISMATCH,
        fmt::format("{}; the dlm schema is missing: apply "
                    "migrations/sqlite/ (`dlmctl migrate --db {}`)",
                    detail, path));
  }
  throw DLMException(ErrorCode::INTERNAL_ERROR, detail);
}

std::optional<FileState> fileStateOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileState state;
  state.id = FileId{static_cast<unsigned long long>(st.st_dev),
                    static_cast<unsigned long long>(st.st_ino)};
  state.size = static_cast<long long>(st.st_size);
  state.changedNs = static_cast<long long>(st.st_ctim.tv_sec) * 1000000000LL +
                    static_cast<long long>(st.st_ctim.tv_nsec);
  return state;
}

std::string canonicalFile(sqlite3* db) {
  // SQLite reports the main file's absolute name; "" for ":memory:" and
  // temporary databases.
  const char* name = sqlite3_db_filename(db, "main");
  if (name == nullptr || *name == '\0') return {};
  std::error_code error;
  const std::filesystem::path resolved =
      std::filesystem::canonical(name, error);
  // The file exists while it is open; should resolving fail anyway (a
  // directory renamed meanwhile), SQLite's absolute name is the best guess.
  return error ? std::string(name) : resolved.string();
}

// --- Statement ---------------------------------------------------------------

Statement::~Statement() {
  // reset's return value repeats the last step's error, already reported.
  // The bindings stay: the next use binds every parameter again, and SQLite
  // then reuses the buffers of the text copies instead of allocating anew.
  sqlite3_reset(stmt_);
}

Statement& Statement::bind(int index, std::string_view text) {
  connection_.check(sqlite3_bind_text64(stmt_, index, text.data(), text.size(),
                                        SQLITE_TRANSIENT, SQLITE_UTF8),
                    "binding a parameter");
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  connection_.check(
      sqlite3_bind_int64(stmt_, index, static_cast<sqlite3_int64>(value)),
      "binding a parameter");
  return *this;
}

Statement& Statement::bindNull(int index) {
  connection_.check(sqlite3_bind_null(stmt_, index), "binding a parameter");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  connection_.fail(rc, sqlite3_sql(stmt_));
}

void Statement::run() {
  while (step()) {
  }
}

bool Statement::isNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

std::int64_t Statement::integer(int column) const {
  return static_cast<std::int64_t>(sqlite3_column_int64(stmt_, column));
}

std::string Statement::text(int column) const {
  // Pointer first, then size: the documented order for a stable conversion.
  const auto* bytes =
      reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  if (bytes == nullptr) return {};
  return std::string(
      bytes, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

// --- Connection --------------------------------------------------------------

Connection::Connection(std::string path, std::chrono::milliseconds busyTimeout,
                       std::chrono::steady_clock::time_point callLimit,
                       OpenMode mode)
    : path_(std::move(path)), busy_(busyTimeout) {
  busy_.limitCall(callLimit);
  sqlite3* raw = nullptr;
  // NOMUTEX: the store's mutex (or, query-only, the one calling thread that
  // owns the connection) already serialises every use of the handle.
  // Query-only goes without CREATE, so a missing file is never created.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                    (mode == OpenMode::kReadWrite ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path_.c_str(), &raw, flags, nullptr);
  db_.reset(raw);  // even a failed open allocates a handle that must be closed
  if (rc != SQLITE_OK) fail(rc, "opening the database file");
  // Extended codes (SQLITE_IOERR_FSYNC, SQLITE_BUSY_SNAPSHOT, ...) for logs.
  sqlite3_extended_result_codes(db_.get(), 1);
  busy_.install(db_.get());
  if (mode == OpenMode::kQueryOnly) {
    // Looking only: any statement that would write fails, the journal mode
    // stays the file's (switching it would write to it) and synchronous
    // matters only to COMMITs.
    execute("PRAGMA query_only = ON", "setting query_only");
    return;
  }

  // WAL: readers never block the writer or each other, and a commit appends
  // to the log instead of rewriting pages. The mode is stored in the file, so
  // this only changes something the first time; it may wait for other
  // connections through the busy handler.
  const std::string journal = switchToWal(callLimit);
  // ":memory:" databases report "memory" and cannot use WAL (nor need it).
  if (journal != "wal" && journal != "memory") {
    throw DLMException(
        ErrorCode::INTERNAL_ERROR,
        fmt::format("sqlite store '{}': the file could not be put in WAL mode "
                    "(journal_mode is '{}'); WAL needs a local file system",
                    path_, journal));
  }
  // Make the connection's starting durability explicit (the compiled-in
  // default differs between builds of SQLite).
  execute("PRAGMA synchronous = FULL", "setting synchronous");
  durability_ = Durability::kDurable;
}

std::string Connection::switchToWal(
    std::chrono::steady_clock::time_point callLimit) {
  // Two connections switching a new file to WAL at once: SQLite answers
  // SQLITE_BUSY to one of them without calling the busy handler (waiting
  // there could deadlock), so try again, within the same bounds a busy wait
  // has.
  const auto until = std::min(
      {callLimit, deadlineOr(busy_.timeout()), deadlineAfter(busy_.timeout())});
  for (;;) {
    try {
      Statement mode = statement("PRAGMA journal_mode = WAL");
      if (!mode.step()) fail(SQLITE_ERROR, "switching to WAL mode");
      return mode.text(0);
    } catch (const DLMException& e) {
      if (!e.transient() || std::chrono::steady_clock::now() >= until) throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Connection::~Connection() = default;

void Connection::fail(int rc, std::string_view what) const {
  throwError(db_.get(), path_, rc, what, busy_.describeLastWait());
}

Statement Connection::statement(const char* sql) {
  auto& slot = statements_[sql];
  if (!slot) {
    sqlite3_stmt* raw = nullptr;
    // PERSISTENT: a hint that the statement lives long and is reused.
    const int rc = sqlite3_prepare_v3(db_.get(), sql, -1,
                                      SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (rc != SQLITE_OK) {
      statements_.erase(sql);
      fail(rc, sql);
    }
    slot.reset(raw);
  }
  return Statement(*this, slot.get());
}

void Connection::execute(const char* sql, std::string_view what) {
  // exec runs every statement of the text in turn; its error message is
  // also left in the handle, so fail() reports it.
  const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, nullptr);
  check(rc, what);
}

void Connection::setDurability(Durability durability) {
  if (durability == durability_) return;
  execute(durability == Durability::kDurable ? "PRAGMA synchronous = FULL"
                                             : "PRAGMA synchronous = NORMAL",
          "setting synchronous");
  durability_ = durability;
}

// --- Transaction -------------------------------------------------------------

Transaction::Transaction(Connection& connection, Durability durability)
    : connection_(connection) {
  connection_.setDurability(durability);
  connection_.statement("BEGIN IMMEDIATE").run();
  open_ = true;
  if (connection_.beginCheck_) {
    try {
      connection_.beginCheck_(connection_);
    } catch (...) {
      // A constructor that throws gets no destructor: roll back here.
      if (sqlite3_get_autocommit(connection_.handle()) == 0) {
        sqlite3_exec(connection_.handle(), "ROLLBACK", nullptr, nullptr,
                     nullptr);
      }
      throw;
    }
  }
}

Transaction::~Transaction() {
  // Some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY in a statement, ...)
  // make SQLite roll back by itself; ROLLBACK would then fail, so ask first.
  if (open_ && sqlite3_get_autocommit(connection_.handle()) == 0) {
    // Failure here cannot be reported from a destructor; closing or the next
    // BEGIN would surface a connection that is still in a transaction.
    sqlite3_exec(connection_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  connection_.statement("COMMIT").run();
  open_ = false;
}

// --- Savepoint ---------------------------------------------------------------

Savepoint::Savepoint(Connection& connection) : connection_(connection) {
  connection_.statement("SAVEPOINT dlm_lock").run();
  open_ = true;
}

Savepoint::~Savepoint() {
  // Only while the enclosing transaction is still open: an error that made
  // SQLite roll it back took the savepoint with it.
  if (open_ && sqlite3_get_autocommit(connection_.handle()) == 0) {
    // Failure here cannot be reported from a destructor; the Transaction
    // around it rolls everything back next.
    sqlite3_exec(connection_.handle(), "ROLLBACK TO dlm_lock; RELEASE dlm_lock",
                 nullptr, nullptr, nullptr);
  }
}

void Savepoint::release() {
  connection_.statement("RELEASE dlm_lock").run();
  open_ = false;
}

void Savepoint::rollback() {
  // ROLLBACK TO undoes the work but keeps the savepoint open; RELEASE ends
  // it (it has nothing left to keep).
  connection_.statement("ROLLBACK TO dlm_lock").run();
  connection_.statement("RELEASE dlm_lock").run();
  open_ = false;
}

}  // namespace dlm::internal::sqlite
