// SqliteStore's state: the one connection (opened on first use, guarded by a
// mutex), the file it must stay on, the fencing floor after a lost file, and
// the release channel of the file. The calls of SqliteStore (sqlite_store.cpp,
// sqlite_store_admin.cpp, sqlite_store_batch.cpp) run their transactions
// through withConnection.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/hidden.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/sqlite_store.h"
#include "sqlite/connection_mutex.h"
#include "sqlite/file_identity.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_release_channel.h"

namespace dlm {

class DLM_HIDDEN SqliteStore::Impl {
 public:
  using Connection = internal::sqlite::Connection;

  explicit Impl(SqliteStoreOptions options);
  ~Impl();

  // Runs fn(connection) with the connection to itself, opening it on first
  // use. `what` names the call for error messages.
  //
  // Bounded: the wait for the connection (another thread of this process
  // using it) and every busy wait for the file's write lock end by the
  // calling thread's deadline (dlm/deadline.h) and each within busyTimeout;
  // with no deadline set, the whole call gets busyTimeout from now (the
  // store's own default bound), so two waits in a row cannot add up to
  // twice that. Either way the caller gets RETRIES_EXHAUSTED (transient).
  template <typename Fn>
  auto withConnection(std::string_view what, Fn&& fn) {
    throwIfClosed();  // before waiting for a connection that is going away
    const Deadline callLimit = currentDeadline()
                                   ? Deadline::max()
                                   : deadlineAfter(options_.busyTimeout);
    const auto guard = mutex_.lock(what, callLimit);
    throwIfClosed();
    Connection& connection = openedConnection(what, callLimit);
    connection.limitCall(callLimit);
    try {
      return fn(connection);
    } catch (const DLMException&) {
      // The marker check of a write transaction found another file.
      if (const auto& why = identity_.lost()) loseFile(what, *why);
      throw;
    }
  }

  // The fencing floor of this store's acquisitions (see loseFile), and
  // each token one of them returned. Under the connection mutex (inside
  // withConnection).
  std::int64_t tokenFloor() const { return tokenFloor_; }
  void sawToken(std::int64_t token) {
    highestToken_ = std::max(highestToken_, token);
  }

  // schemaState: reads the file without creating it or anything in it.
  SchemaState schemaState();

  // Whether the database file is there; an in-memory database has none.
  bool fileMissing() const;

  // After an initialize that created the file and then failed before any
  // of dlm's tables were committed: closes the connection and removes the
  // file and what SQLite made beside it, so a failed first start leaves
  // nothing behind. A file that has tables by now (a migration committed,
  // or another process that opened the same new file made them) stays.
  void removeFileIfStillEmpty();

  void close();

  // The release channel of this store's file (its canonical path, or a
  // private name for an in-memory database). Takes the connection mutex (and
  // opens the connection) only when no connection was ever opened.
  std::string channel();

  // The channel if a connection was ever opened, else empty. Takes only the
  // channel's own mutex, never the connection's.
  std::string knownChannel();

  // Tells this process's listeners on the file that `key` was freed. Called
  // without the connection mutex: listeners never wait for a store call.
  // Also signals the waiters of other processes through the wake file
  // (never creating it; a failure to signal only leaves them polling).
  //
  // Once per release: reads the channel and the wake file's name without a
  // mutex or a copy (both are fixed once channelSet_ is).
  void announce(std::string_view key);
  // announce for the keys a batch freed: each key to this process's
  // listeners, and one signal of the wake file for them all (a signal makes
  // every waiter of another process on the file look again).
  void announceAll(const std::vector<std::string>& keys);

  bool wakeOtherProcesses() const { return options_.wakeOtherProcesses; }

  internal::sqlite::SqliteReleaseChannel& bus() { return *bus_; }
  const std::string& path() const { return options_.path; }

  void throwIfClosed() const;

 private:
  // The connection, opened (or re-checked against its file) for a call
  // that holds the connection mutex. `callLimit` bounds the opening.
  Connection& openedConnection(std::string_view what, Deadline callLimit);

  // The file connection_ opened is gone or no longer that file (`why`):
  // going on would renew locks that the file there now does not have, and
  // hand out again the fencing tokens its rows start from. Every lock held
  // through the old file is lost. Closes the connection (the next call
  // opens whatever is there now, never a new file) and raises the floor.
  //
  // The floor is one number for all keys, the highest token this store ever
  // returned: from now on each acquisition's token is above it (and above
  // the key's row), so no key's token goes back while this store lives.
  // Tokens skip numbers after a loss, which fencing allows; a mark per key
  // would grow with every key the store ever touched.
  [[noreturn]] void loseFile(std::string_view what, std::string why);

  const SqliteStoreOptions options_;
  // Kept so the process-wide bus outlives this store.
  const std::shared_ptr<internal::sqlite::SqliteReleaseChannel> bus_;
  // Guards connection_ (one thread at a time on the handle).
  internal::sqlite::ConnectionMutex mutex_;
  // Atomic so that commitLock and now() check it without the connection
  // mutex, and close() can refuse new calls before it waits for that mutex.
  std::atomic<bool> closed_{false};
  std::unique_ptr<Connection> connection_;
  // Whether the file connection_ opened is still there and still that file
  // (checked before every call and in every write transaction), and
  // whether a file was lost (deleted, replaced, truncated, rewritten) under
  // it. Guarded by mutex_.
  internal::sqlite::FileIdentity identity_;
  bool fileLost_ = false;
  // The highest fencing token this store's acquisitions returned, and the
  // floor its acquisitions stay above: 0 until a file is lost, then that
  // highest token (see loseFile). Guarded by mutex_.
  std::int64_t highestToken_ = 0;
  std::int64_t tokenFloor_ = 0;
  // Set once, when the first connection opens; guarded apart from mutex_ so
  // unsubscribing and announcing never wait for a transaction.
  // channel_ and wakePath_ are written once, under channelMutex_, before
  // channelSet_ turns true, and never change after: readers that see
  // channelSet_ read them without the mutex.
  std::mutex channelMutex_;
  std::string channel_;
  // The wake file of a file channel, empty for a private one.
  std::string wakePath_;
  std::atomic<bool> channelSet_{false};
};

}  // namespace dlm
