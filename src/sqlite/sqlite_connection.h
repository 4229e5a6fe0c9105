// A thin RAII layer over the SQLite C API for the SQLite store: one
// connection with its busy handler and cached prepared statements, IMMEDIATE
// transactions, and the one place where SQLite result codes become
// DLMExceptions (Connection::check).
//
// Nothing here is thread-safe: the store serialises all use of a Connection
// with its own mutex (the handle is opened with SQLITE_OPEN_NOMUTEX).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "sqlite/busy_wait.h"

namespace dlm::internal::sqlite {

struct DatabaseCloser {
  void operator()(sqlite3* db) const noexcept;
};
struct StatementFinalizer {
  void operator()(sqlite3_stmt* stmt) const noexcept;
};

// How hard a write transaction's COMMIT goes to disk.
enum class Durability {
  // synchronous=FULL: the WAL is fsynced before COMMIT returns, so the
  // transaction survives a power loss or OS crash. For acquisitions and
  // extensions (see sqlite_store.cpp for why).
  kDurable,
  // synchronous=NORMAL: no fsync at COMMIT; survives a crash of the process,
  // may be lost (with the transactions after it, never before it) on power
  // loss or OS crash. For releases, whose loss is safe.
  kLazy,
};

class Connection;

// The one translation of SQLite failures into DLMException (Connection::fail
// uses it for the store's own handle; commitLock for the application's):
//   SQLITE_BUSY / SQLITE_LOCKED / SQLITE_PROTOCOL (after the busy handler
//     gave up)                       -> RETRIES_EXHAUSTED, transient
//   SQLITE_CANTOPEN                  -> CONNECTION_ERROR
//   SQLITE_IOERR                     -> CONNECTION_ERROR, transient
//   "no such table"                  -> SCHEMA_MISMATCH
//   anything else                    -> INTERNAL_ERROR
// The message carries the path, what was being done, the extended result
// code and db's errmsg (db may be null), and for busy errors `waitNote` (how
// long the busy handler waited and what ended the wait) when not empty.
[[noreturn]] void throwError(sqlite3* db, std::string_view path, int rc,
                             std::string_view what, std::string_view waitNote);

// The file `db` has open as its main database, with symbolic links and
// relative parts resolved, so that two connections on one file give the same
// string; empty for an in-memory or temporary database.
std::string canonicalFile(sqlite3* db);

// Which file a path names now: device and inode.
struct FileId {
  unsigned long long device = 0;
  unsigned long long inode = 0;
  bool operator==(const FileId& o) const {
    return device == o.device && inode == o.inode;
  }
  bool operator!=(const FileId& o) const { return !(*this == o); }
};
// What stat says of the file a path names now.
struct FileState {
  FileId id;
  long long size = 0;
  // st_ctim in nanoseconds: moved by every write and truncation of the file
  // (in WAL mode SQLite writes the file only when it checkpoints).
  long long changedNs = 0;
};
// The file `path` names, or nullopt when there is none (deleted).
std::optional<FileState> fileStateOf(const std::string& path);

// A cached prepared statement in use. Resets the statement when destroyed,
// so a cached statement never keeps a read transaction open between calls.
// The parameters keep the values of the previous use (cheaper than clearing
// them): every use binds each of its statement's parameters, NULL included.
class Statement {
 public:
  Statement(Connection& connection, sqlite3_stmt* stmt)
      : connection_(connection), stmt_(stmt) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Parameters are 1-based as in SQL (?1, ?2, ...). Text is bound by copy
  // (SQLITE_TRANSIENT) so the caller's string may go away before step().
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, std::int64_t value);
  Statement& bindNull(int index);

  // True when a row is available, false when the statement is done.
  bool step();
  // Runs a statement that returns no rows (or whose rows do not matter).
  void run();

  bool isNull(int column) const;
  std::int64_t integer(int column) const;
  // Empty for NULL.
  std::string text(int column) const;

 private:
  Connection& connection_;
  sqlite3_stmt* stmt_;  // owned by the connection's cache
};

// How a Connection opens its file.
enum class OpenMode {
  // Read and write, creating the file if missing, switched to WAL: the
  // store's own connection.
  kReadWrite,
  // As kReadWrite, but an existing file only (SQLITE_CANTOPEN otherwise):
  // a store whose file disappeared under it never makes a new one.
  kReadWriteExisting,
  // An existing file only (SQLITE_CANTOPEN otherwise, never created), with
  // PRAGMA query_only on and the journal mode left as it is: for looking at
  // a file without changing it (schemaState). Opened read-write rather than
  // SQLITE_OPEN_READONLY because a read-only connection that is the last one
  // on a WAL file leaves its -wal and -shm files behind when it closes;
  // this one removes them as every closing connection does.
  kQueryOnly,
};

class Connection {
 public:
  // Opens the file as `mode` says and installs the busy handler, its busy
  // waits ending by `callLimit` too (see limitCall). kReadWrite also puts
  // the file in WAL mode. Throws like check().
  Connection(std::string path, std::chrono::milliseconds busyTimeout,
             std::chrono::steady_clock::time_point callLimit =
                 std::chrono::steady_clock::time_point::max(),
             OpenMode mode = OpenMode::kReadWrite);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_.get(); }

  // Throws unless rc is SQLITE_OK / SQLITE_ROW / SQLITE_DONE. `what` says
  // what was being done, for the message.
  void check(int rc, std::string_view what) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) {
      fail(rc, what);
    }
  }
  // throwError for this connection.
  [[noreturn]] void fail(int rc, std::string_view what) const;

  // A statement prepared on first use and reused afterwards. `sql` must be a
  // string with static storage (a literal): it is the cache key.
  Statement statement(const char* sql);

  // BusyWait::limitCall for the store call about to use this connection.
  void limitCall(std::chrono::steady_clock::time_point ends) {
    busy_.limitCall(ends);
  }

  // Runs SQL text that may hold several statements (migrations, PRAGMAs).
  void execute(const char* sql, std::string_view what);

  // Sets synchronous for the next COMMITs. Only outside a transaction
  // (SQLite refuses to change it inside one).
  void setDurability(Durability durability);

  // Run by every Transaction right after its BEGIN IMMEDIATE (the store's
  // check that the file is still its own); what it throws rolls the
  // transaction back and leaves the constructor.
  void onBegin(std::function<void(Connection&)> check) {
    beginCheck_ = std::move(check);
  }

  // Frees the connection's page cache (outside a transaction), so that the
  // next transaction reads every page from the WAL or the file again.
  void dropPageCache() { sqlite3_db_release_memory(db_.get()); }

 private:
  // PRAGMA journal_mode = WAL, retried while another connection switches
  // the same new file (see the .cpp); the journal mode it reports.
  std::string switchToWal(std::chrono::steady_clock::time_point callLimit);

  std::string path_;
  // Declared before db_ so it outlives the handle that points to it.
  BusyWait busy_;
  std::unique_ptr<sqlite3, DatabaseCloser> db_;
  // Destroyed (finalized) before db_ closes.
  std::unordered_map<const char*,
                     std::unique_ptr<sqlite3_stmt, StatementFinalizer>>
      statements_;
  Durability durability_ = Durability::kDurable;
  std::function<void(Connection&)> beginCheck_;

  friend class Transaction;
};

// BEGIN IMMEDIATE ... COMMIT. BEGIN IMMEDIATE takes the file's write lock at
// once (waiting through the busy handler), which serialises every writer of
// the file the way SELECT ... FOR UPDATE serialises writers of a row, and
// rules out the deadlock of two readers upgrading to writers. Rolls back when
// destroyed without commit() (an exception left the scope).
class Transaction {
 public:
  Transaction(Connection& connection, Durability durability);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  void commit();

 private:
  Connection& connection_;
  bool open_ = false;
};

// SAVEPOINT ... RELEASE inside an open Transaction: the work of one lock of
// a batch, which rollback() undoes alone (ROLLBACK TO) when an error of its
// own refuses that lock, while the batch's transaction goes on. Destroyed
// without release() or rollback() (an exception left the scope), it rolls
// back to the savepoint as best it can; the transaction it sits in is then
// rolled back by its own Transaction anyway. One at a time per connection.
class Savepoint {
 public:
  explicit Savepoint(Connection& connection);
  Savepoint(const Savepoint&) = delete;
  Savepoint& operator=(const Savepoint&) = delete;
  ~Savepoint();

  // Keeps the work done since the savepoint (in the enclosing transaction).
  void release();
  // Undoes the work done since the savepoint and ends it. Throws like
  // Connection::check when SQLite cannot (the transaction is then in an
  // unknown state: its Transaction rolls it back).
  void rollback();

 private:
  Connection& connection_;
  bool open_ = false;
};

}  // namespace dlm::internal::sqlite
