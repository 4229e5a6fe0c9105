// The SQLite store. One connection per store object, opened on first use and
// guarded by a mutex; every write is one BEGIN IMMEDIATE transaction, whose
// file write lock serialises all writers of the file (threads and processes)
// the way SELECT ... FOR UPDATE serialises the writers of a row on
// PostgreSQL. Because the whole file is locked, the hierarchy protocol needs
// no row locks here: the checks and the update of one acquisition simply run
// in the same write transaction.
//
// Durability (PRAGMA synchronous, per transaction):
// - Acquisitions and extensions COMMIT with synchronous=FULL (the WAL is
//   fsynced before COMMIT returns). In WAL mode synchronous=NORMAL would
//   survive any crash of a process but may lose the last transactions on
//   power loss or an OS crash. That loss would not let two holders in (every
//   process using the file runs on this host and dies with it), but the
//   rolled-back row would hand out the same fencing token again after the
//   reboot, and a holder may already have shown that token to a system that
//   survived (a remote service checking fencing tokens). So acquisitions
//   must be durable.
// - Releases COMMIT with synchronous=NORMAL: a release lost on power loss
//   only keeps the lock held until its TTL, which is safe, and saves one
//   fsync per acquire/release cycle (the DESIGN's "durable acquire, lazy
//   release"). WAL recovery keeps a prefix of the commits, so a later durable
//   acquisition also makes the releases before it durable.
#include "dlm/sqlite_store.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "dlm/error.h"
#include "sqlite/sqlite_acquire.h"
#include "sqlite/sqlite_app_transaction.h"
#include "sqlite/sqlite_extend.h"
#include "sqlite/sqlite_release.h"
#include "sqlite/sqlite_schema_setup.h"
#include "sqlite/sqlite_store_impl.h"
#include "sqlite/sqlite_wait_graph.h"
#include "sqlite/store_time.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::fromMs;
using internal::sqlite::nowMs;

SqliteStore::SqliteStore(SqliteStoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

SqliteStore::~SqliteStore() = default;

std::string_view SqliteStore::name() const { return "sqlite"; }

void SqliteStore::initialize(bool applyMigrations) {
  const bool created = impl_->fileMissing();
  try {
    impl_->withConnection("initializing", [&](Connection& c) {
      internal::sqlite::initializeSchemaIn(c, applyMigrations);
    });
  } catch (const DLMException&) {
    if (created) impl_->removeFileIfStillEmpty();
    throw;
  }
}

void SqliteStore::close() { impl_->close(); }

StoreTime SqliteStore::now() {
  // The application's clock: no I/O, but a closed store refuses like every
  // other call.
  impl_->throwIfClosed();
  return fromMs(nowMs());
}

// --- Taking, freeing and keeping locks ---------------------------------------

AcquireResult SqliteStore::tryAcquire(const AcquireRequest& request) {
  return impl_->withConnection("acquiring", [&](Connection& c) {
    AcquireResult result =
        internal::sqlite::acquireIn(c, request, impl_->tokenFloor());
    if (result.acquired) impl_->sawToken(result.fencingToken);
    return result;
  });
}

bool SqliteStore::release(const StoreKey& storeKey, std::string_view token,
                          LockMode mode) {
  const std::string_view key = storeKey.key;
  const internal::sqlite::ReleaseDone done = impl_->withConnection(
      mode == LockMode::SHARED ? "releasing a shared hold" : "releasing",
      [&](Connection& c) {
        return internal::sqlite::releaseIn(c, key, token, mode);
      });
  // After COMMIT and outside the connection mutex: a woken waiter's attempt
  // sees the row free and does not wait for this store.
  if (done.freed) impl_->announce(key);
  return done.released;
}

std::optional<StoreTime> SqliteStore::extend(std::string_view key,
                                             std::string_view token,
                                             std::chrono::milliseconds ttl,
                                             LockMode mode) {
  const auto expires = impl_->withConnection("extending", [&](Connection& c) {
    return internal::sqlite::extendIn(c, key, token, ttl, mode);
  });
  if (!expires) return std::nullopt;
  return fromMs(*expires);
}

// --- The application's transaction --------------------------------------

void SqliteStore::commitLock(AppTransaction& tx, const StoreKey& key,
                             std::string_view token, LockMode mode) {
  const std::string& path = impl_->path();
  impl_->throwIfClosed();
  // channel() does not take the connection mutex once the store has opened
  // its connection (it has: the lock was acquired through it); waiting for
  // that mutex could stall, as another thread of this store may hold it
  // while its BEGIN IMMEDIATE waits for the application's write lock.
  sqlite3* db =
      internal::sqlite::appConnection(tx, "commitLock", path, impl_->channel());
  // On the application's handle, so the release commits or rolls back with
  // its work.
  if (!internal::sqlite::releaseOnAppConnection(db, path, key.key, token, mode,
                                                nowMs())) {
    // Taken over after expiry (or force-released): the application's work
    // ran unprotected.
    internal::sqlite::refuseAppTransaction(
        db, path, key.key,
        "it expired and was taken over, or was force-released");
  }
  // The application commits later, and SQLite cannot tell us when. Announce
  // now: a woken waiter's BEGIN IMMEDIATE waits (busy handler) until the
  // application's transaction ends, then sees the row free if it committed;
  // after a rollback it finds the lock still held and polls.
  impl_->announce(key.key);
}

void SqliteStore::guardWithin(AppTransaction& tx, const StoreKey& key,
                              std::string_view token, LockMode mode) {
  const std::string& path = impl_->path();
  impl_->throwIfClosed();
  sqlite3* db = internal::sqlite::appConnection(tx, "guardWithin", path,
                                                impl_->channel());
  // A read in the application's transaction: once that transaction writes
  // (or under BEGIN IMMEDIATE, already), it holds the file's write lock and
  // no takeover can commit before it ends; a takeover that committed after
  // this read makes its first write fail (SQLITE_BUSY_SNAPSHOT).
  if (!internal::sqlite::holdsOnAppConnection(db, path, key.key, token, mode,
                                              nowMs())) {
    internal::sqlite::refuseAppTransaction(
        db, path, key.key,
        "its lease ended, or it was released, taken over or force-released");
  }
}

// --- Waits and deadlock detection --------------------------------------------

WaitRegistration SqliteStore::registerWait(const WaitRequest& request) {
  return impl_->withConnection("registering a wait", [&](Connection& c) {
    return internal::sqlite::registerWaitIn(c, request);
  });
}

void SqliteStore::unregisterWait(std::string_view key, std::string_view owner) {
  const bool wake =
      impl_->withConnection("unregistering a wait", [&](Connection& c) {
        return internal::sqlite::unregisterWaitIn(c, key, owner);
      });
  // Waiters it held back (fair queueing) may go first now: wake them like a
  // release does, after COMMIT and outside the connection mutex.
  if (wake) impl_->announce(key);
}

// --- Release notifications ---------------------------------------------------

bool SqliteStore::subscribeReleases(ReleaseListener* listener) {
  if (listener == nullptr) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "subscribeReleases: the listener is null");
  }
  // Opens the connection (if not yet) to learn the file's canonical name.
  // Delivery is active once subscribe returns: every announce after this
  // finds the listener.
  impl_->bus().subscribe(impl_->channel(), impl_.get(), listener,
                         impl_->wakeOtherProcesses());
  return true;
}

void SqliteStore::unsubscribeReleases(ReleaseListener* listener) {
  // Works after close() too; waits for a delivery to `listener` in progress.
  const std::string channel = impl_->knownChannel();
  if (!channel.empty())
    impl_->bus().unsubscribe(channel, impl_.get(), listener);
}

}  // namespace dlm
