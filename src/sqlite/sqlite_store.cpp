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

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/crc32.h"
#include "common/hidden.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"
#include "sqlite/conflicts.h"
#include "sqlite/connection_mutex.h"
#include "sqlite/cycle_sql.h"
#include "sqlite/file_identity.h"
#include "sqlite/release_wake_file.h"
#include "sqlite/sqlite_acquire.h"
#include "sqlite/sqlite_app_transaction.h"
#include "sqlite/sqlite_connection.h"
#include "sqlite/sqlite_limits.h"
#include "sqlite/sqlite_release_channel.h"
#include "sqlite/sqlite_wait_graph.h"
#include "sqlite/store_time.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::Durability;
using internal::sqlite::expiryMs;
using internal::sqlite::fromMs;
using internal::sqlite::nowMs;
using internal::sqlite::SqliteReleaseChannel;
using internal::sqlite::Statement;
using internal::sqlite::Transaction;
using std::chrono::milliseconds;

namespace {

// The smallest string greater than every string starting with `prefix`, or
// nullopt when there is none (the prefix is all 0xFF bytes).
std::optional<std::string> prefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last != 0xFF) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::nullopt;
}

// Ends the "apply migrations/sqlite/V<n>__... and the later ones" message.
std::string migrateHint(const std::string& path) {
  return fmt::format("with `dlmctl migrate --db sqlite:{}`", path);
}

// Column list shared by describe and listHeld; readRecord reads it.
#define DLM_RECORD_COLUMNS                                              \
  "resource, status, owner_id, fencing_token, acquired_at_ms, ttl_ms, " \
  "expires_at_ms, holder_host, holder_pid, holder_ip"

LockRecord readRecord(const Statement& row, std::int64_t now) {
  LockRecord r;
  r.key = row.text(0);
  r.statusHeld = row.text(1) == "HELD";
  r.owner = row.text(2);
  r.fencingToken = row.integer(3);
  r.acquiredAt = fromMs(row.integer(4));
  r.ttl = milliseconds(row.integer(5));
  r.expiresAt = fromMs(row.integer(6));
  r.held = r.statusHeld && row.integer(6) > now;
  r.holder.host = row.text(7);
  r.holder.pid = row.integer(8);
  // Never filled on SQLite (no network peer); NULL reads as "".
  r.holderIp = row.text(9);
  return r;
}

// Whether the version table has V3's checksum and compatible_from columns
// (added together by V3; a version-2 file has neither).
bool hasVersionColumnsOfV3(Connection& c) {
  Statement columns = c.statement(
      "SELECT count(*) FROM pragma_table_info('dlm_schema_version') "
      "WHERE name IN ('checksum', 'compatible_from')");
  return columns.step() && columns.integer(0) == 2;
}

// Every row of the version table, or present == false when the file has
// none. Several statements outside a transaction: a migration committing in
// between only makes the answer newer.
SchemaState readSchemaState(Connection& c) {
  SchemaState state;
  {
    Statement exists = c.statement(
        "SELECT count(*) FROM sqlite_master "
        "WHERE type = 'table' AND name = 'dlm_schema_version'");
    if (!exists.step() || exists.integer(0) == 0) return state;
  }
  state.present = true;
  // applied_at is already UTC ISO-8601 text (the column's default). Files
  // before version 3 have no checksum or compatible_from: read as NULL.
  Statement rows = c.statement(
      hasVersionColumnsOfV3(c)
          ? "SELECT version, description, applied_at, checksum, "
            "compatible_from FROM dlm_schema_version ORDER BY version"
          : "SELECT version, description, applied_at, NULL, NULL "
            "FROM dlm_schema_version ORDER BY version");
  int compatibleFrom = 0;
  while (rows.step()) {
    AppliedMigration m;
    m.version = static_cast<int>(rows.integer(0));
    m.description = rows.text(1);
    m.appliedAt = rows.text(2);
    if (!rows.isNull(3)) {
      m.checksum = static_cast<std::uint32_t>(rows.integer(3));
    }
    // The newest row's declaration counts; NULL means not recorded (0).
    compatibleFrom = rows.isNull(4) ? 0 : static_cast<int>(rows.integer(4));
    state.applied.push_back(std::move(m));
  }
  state.compatibleFrom = compatibleFrom;
  return state;
}

}  // namespace

class DLM_HIDDEN SqliteStore::Impl {
 public:
  explicit Impl(SqliteStoreOptions options)
      : options_(std::move(options)),
        bus_(SqliteReleaseChannel::shared()),
        mutex_(options_.path, options_.busyTimeout) {}

  ~Impl() {
    // Listeners left subscribed (the owner forgot to unsubscribe) must not
    // be called after the store is gone.
    const std::string channel = knownChannel();
    if (!channel.empty()) bus_->unsubscribeAll(channel, this);
  }

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
    if (connection_) {
      if (auto why = identity_.beforeCall(*connection_)) loseFile(what, *why);
    }
    if (!connection_) {
      // Not kept when opening fails, so the next call tries again.
      // After its file was lost, never a new one in its place (not even
      // through initialize(true)): that file would hand fencing tokens out
      // from 1 again. Someone who means it makes the file (dlmctl migrate).
      connection_ = std::make_unique<Connection>(
          options_.path, options_.busyTimeout, callLimit,
          fileLost_ ? internal::sqlite::OpenMode::kReadWriteExisting
                    : internal::sqlite::OpenMode::kReadWrite);
      identity_.opened(internal::sqlite::canonicalFile(connection_->handle()));
      connection_->onBegin([this](Connection& c) { identity_.checkMarker(c); });
      std::lock_guard<std::mutex> channelGuard(channelMutex_);
      if (channel_.empty()) {
        // Named once, by the first connection: every store object on the
        // same file gets the same name, however its path was spelled.
        const std::string file =
            internal::sqlite::canonicalFile(connection_->handle());
        channel_ = file.empty() ? SqliteReleaseChannel::privateChannel() : file;
        // File channels are canonical paths; ":memory:" ones have no file.
        if (channel_.front() == '/') {
          wakePath_ = internal::sqlite::wakeFilePath(channel_);
        }
        channelSet_.store(true, std::memory_order_release);
      }
    }
    connection_->limitCall(callLimit);
    try {
      return fn(*connection_);
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
  SchemaState schemaState() {
    throwIfClosed();
    const std::string& path = options_.path;
    // In-memory and temporary databases exist only in this store's own
    // connection (and write nothing to disk): look there.
    if (path.empty() || path == ":memory:") {
      return withConnection("reading the schema version", readSchemaState);
    }
    // No file, no schema. The store's connection would create the file (and
    // switch it to WAL), so look through a query-only connection of this
    // call's own instead, which never creates the file either.
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (status.type() == std::filesystem::file_type::not_found) {
      return SchemaState{};
    }
    const Deadline callLimit = currentDeadline()
                                   ? Deadline::max()
                                   : deadlineAfter(options_.busyTimeout);
    Connection queryOnly(path, options_.busyTimeout, callLimit,
                         internal::sqlite::OpenMode::kQueryOnly);
    return readSchemaState(queryOnly);
  }

  // Whether the database file is there; an in-memory database has none.
  bool fileMissing() const {
    const std::string& path = options_.path;
    if (path.empty() || path == ":memory:") return false;
    std::error_code error;
    return std::filesystem::status(path, error).type() ==
           std::filesystem::file_type::not_found;
  }

  // After an initialize that created the file and then failed before any
  // of dlm's tables were committed: closes the connection and removes the
  // file and what SQLite made beside it, so a failed first start leaves
  // nothing behind. A file that has tables by now (a migration committed,
  // or another process that opened the same new file made them) stays.
  void removeFileIfStillEmpty() {
    {
      const auto guard = mutex_.lockForClose();
      connection_.reset();
      identity_.forget();
    }
    std::error_code error;
    const auto size = std::filesystem::file_size(options_.path, error);
    if (error) return;
    // An empty file is one SQLite never wrote to (it writes the header with
    // the first table); else look.
    if (size != 0) {
      try {
        Connection queryOnly(options_.path, options_.busyTimeout,
                             deadlineAfter(options_.busyTimeout),
                             internal::sqlite::OpenMode::kQueryOnly);
        Statement tables =
            queryOnly.statement("SELECT count(*) FROM sqlite_master");
        if (!tables.step() || tables.integer(0) != 0) return;
      } catch (const DLMException&) {
        return;  // cannot tell: keep it
      }
    }
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::error_code ignored;
      std::filesystem::remove(options_.path + suffix, ignored);
    }
  }

  void close() {
    // Set first: calls arriving meanwhile are refused at once instead of
    // queueing behind the call in progress.
    closed_ = true;
    {
      const auto guard = mutex_.lockForClose();
      connection_.reset();
    }
    // Listeners hear nothing more from a closed store; with the file's last
    // subscription this stops its wake watcher thread.
    const std::string channel = knownChannel();
    if (!channel.empty()) bus_->unsubscribeAll(channel, this);
  }

  // The release channel of this store's file (its canonical path, or a
  // private name for an in-memory database). Takes the connection mutex (and
  // opens the connection) only when no connection was ever opened.
  std::string channel() {
    std::string known = knownChannel();
    if (!known.empty()) return known;
    withConnection("opening the connection", [](Connection&) { return 0; });
    return knownChannel();
  }

  // The channel if a connection was ever opened, else empty. Takes only the
  // channel's own mutex, never the connection's.
  std::string knownChannel() {
    if (channelSet_.load(std::memory_order_acquire)) return channel_;
    std::lock_guard<std::mutex> guard(channelMutex_);
    return channel_;
  }

  // Tells this process's listeners on the file that `key` was freed. Called
  // without the connection mutex: listeners never wait for a store call.
  // Also signals the waiters of other processes through the wake file
  // (never creating it; a failure to signal only leaves them polling).
  //
  // Once per release: reads the channel and the wake file's name without a
  // mutex or a copy (both are fixed once channelSet_ is).
  void announce(std::string_view key) {
    if (!channelSet_.load(std::memory_order_acquire)) return;
    if (options_.wakeOtherProcesses && !wakePath_.empty()) {
      internal::sqlite::signalWakeFile(wakePath_);
    }
    bus_->publish(channel_, key);
  }

  bool wakeOtherProcesses() const { return options_.wakeOtherProcesses; }

  SqliteReleaseChannel& bus() { return *bus_; }
  const std::string& path() const { return options_.path; }

  void throwIfClosed() const {
    if (closed_) {
      throw DLMException(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("sqlite store '{}': store closed", options_.path));
    }
  }

 private:
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
  [[noreturn]] void loseFile(std::string_view what, std::string why) {
    connection_.reset();
    identity_.forget();
    fileLost_ = true;
    tokenFloor_ = highestToken_;
    throw DLMException(
        ErrorCode::CONNECTION_ERROR,
        fmt::format("sqlite store '{}': {}: the database file was deleted "
                    "or replaced while in use ({}); locks held through it "
                    "are lost",
                    options_.path, what, why));
  }

  const SqliteStoreOptions options_;
  // Kept so the process-wide bus outlives this store.
  const std::shared_ptr<SqliteReleaseChannel> bus_;
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

namespace {

// The highest applied migration, 0 when the version table does not exist.
bool hasVersionTable(Connection& c) {
  // sqlite_master tells whether the table exists without provoking (and
  // then having to tell apart) a "no such table" error.
  Statement exists = c.statement(
      "SELECT count(*) FROM sqlite_master "
      "WHERE type = 'table' AND name = 'dlm_schema_version'");
  return exists.step() && exists.integer(0) != 0;
}

int schemaVersion(Connection& c) {
  if (!hasVersionTable(c)) return 0;
  Statement version =
      c.statement("SELECT coalesce(max(version), 0) FROM dlm_schema_version");
  version.step();
  return static_cast<int>(version.integer(0));
}

// Records the checksum of each migration in `applied` (applied by this run),
// once the version table has the column (V3 adds it; the checksums of V1 and
// V2 applied in the same run are recorded in V3's transaction). Returns
// whether it recorded them, so the caller forgets them only then.
bool recordChecksums(Connection& c,
                     const std::vector<const internal::Migration*>& applied) {
  if (!hasVersionColumnsOfV3(c)) return false;
  for (const internal::Migration* m : applied) {
    c.statement(
         "UPDATE dlm_schema_version SET checksum = ?2 WHERE version = ?1")
        .bind(1, static_cast<std::int64_t>(m->version))
        .bind(2, static_cast<std::int64_t>(internal::migrationChecksum(*m)))
        .run();
  }
  return true;
}

// A file without dlm's tables gets them all in one write transaction: a
// process that opens the same new file meanwhile finds either no schema
// (and waits for this transaction's write lock, then finds it whole) or the
// whole schema, never a part of it.
void createSchema(Connection& c) {
  try {
    Transaction tx(c, Durability::kDurable);
    if (hasVersionTable(c)) {  // another process made it first
      tx.commit();
      return;
    }
    std::vector<const internal::Migration*> applied;
    for (const auto& m : internal::sqliteMigrations()) {
      const std::string sql(m.sql);  // exec needs a NUL-terminated string
      c.execute(sql.c_str(),
                fmt::format("applying migrations/sqlite/{}", m.file));
      applied.push_back(&m);
    }
    recordChecksums(c, applied);
    tx.commit();
  } catch (const DLMException& e) {
    if (e.code() == ErrorCode::TABLE_CREATION_ERROR) throw;
    throw DLMException(ErrorCode::TABLE_CREATION_ERROR,
                       fmt::format("sqlite store '{}': creating dlm's tables "
                                   "failed: {} (rolled back)",
                                   c.path(), e.what()),
                       e.transient());
  }
}

void applyMigrations(Connection& c, int from) {
  // Applied by this run, checksum not yet recorded.
  std::vector<const internal::Migration*> unrecorded;
  for (const auto& m : internal::sqliteMigrations()) {
    if (m.version <= from) continue;
    const std::string what =
        fmt::format("applying migrations/sqlite/{}", m.file);
    try {
      // One transaction per migration; the write lock serialises processes
      // initializing the same file at once.
      Transaction tx(c, Durability::kDurable);
      // Re-read inside the lock: another process may have applied it since.
      const int current = schemaVersion(c);
      if (current >= m.version) {
        tx.commit();
        continue;
      }
      if (current != m.version - 1) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("sqlite store '{}': {} failed: schema version is {}, "
                        "expected {}",
                        c.path(), what, current, m.version - 1));
      }
      const std::string sql(m.sql);  // exec needs a NUL-terminated string
      c.execute(sql.c_str(), what);
      // The migration records its own version row; check it did.
      if (schemaVersion(c) != m.version) {
        throw DLMException(
            ErrorCode::TABLE_CREATION_ERROR,
            fmt::format("sqlite store '{}': {} failed: it did not record "
                        "schema version {}",
                        c.path(), what, m.version));
      }
      // The text just run, exactly: a file changed later shows as drift.
      unrecorded.push_back(&m);
      const bool recorded = recordChecksums(c, unrecorded);
      tx.commit();
      if (recorded) unrecorded.clear();
    } catch (const DLMException& e) {
      // Any failure while applying (busy included) is reported as such; the
      // message already carries the path, the file and the SQLite code.
      if (e.code() == ErrorCode::TABLE_CREATION_ERROR) throw;
      throw DLMException(ErrorCode::TABLE_CREATION_ERROR,
                         fmt::format("{} (rolled back)", e.what()),
                         e.transient());
    }
  }
}

}  // namespace

SqliteStore::SqliteStore(SqliteStoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

SqliteStore::~SqliteStore() = default;

std::string_view SqliteStore::name() const { return "sqlite"; }

void SqliteStore::initialize(bool applyMigrations) {
  const bool created = impl_->fileMissing();
  try {
    impl_->withConnection("initializing", [&](Connection& c) {
      const auto& migrations = internal::sqliteMigrations();
      const int latest = internal::latestVersion(migrations);
      // The store's own file: one without dlm's tables (new, or the
      // application's own database) gets them, asked or not. An older dlm
      // schema is migrated only when asked (applyMigrations, `dlmctl
      // migrate`): processes of an older library may still use the file,
      // and reading (dlmctl list) must not change it.
      if (!hasVersionTable(c)) createSchema(c);
      const int current = schemaVersion(c);
      if (current < latest && applyMigrations) {
        dlm::applyMigrations(c, current);
      }
      // The rolling-upgrade rule (src/schema_compat.h): this version, or a
      // newer one that still declares it serves this library's version.
      internal::requireCompatibleSchema(
          readSchemaState(c), migrations, "sqlite",
          fmt::format("sqlite store '{}'", c.path()), migrateHint(c.path()));
    });
  } catch (const DLMException&) {
    if (created) impl_->removeFileIfStillEmpty();
    throw;
  }
}

void SqliteStore::close() { impl_->close(); }

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
  if (mode == LockMode::SHARED) {
    // The hold's own row, conditional on its token; a released (or taken
    // over) SHARED hold leaves nothing behind, so a retry is false.
    const bool deleted =
        impl_->withConnection("releasing a shared hold", [&](Connection& c) {
          Transaction tx(c, Durability::kLazy);
          c.statement(internal::sqlite::sql::kReleaseShared)
              .bind(1, key)
              .bind(2, token)
              .run();
          const bool changed = sqlite3_changes(c.handle()) > 0;
          tx.commit();
          return changed;
        });
    if (deleted) impl_->announce(key);
    return deleted;
  }
  // {true when this token's acquisition is released, true when this call
  // freed it (and must announce it)}.
  const auto [released, freed] =
      impl_->withConnection("releasing", [&](Connection& c) {
        Transaction tx(c, Durability::kLazy);
        // Conditional on the acquisition's token: a holder whose lock expired
        // and was taken over cannot free the new holder's lock.
        // The lease ends now (purge judges idleness from it).
        c.statement(internal::sqlite::sql::kReleaseExclusive)
            .bind(1, key)
            .bind(2, token)
            .bind(3, nowMs())
            .run();
        const bool changed = sqlite3_changes(c.handle()) > 0;
        bool already = false;
        if (!changed) {
          // The token stays on the row after a release, so a retried release of
          // the same acquisition (its reply was lost) is true again; it frees
          // nothing, so wakes no one.
          Statement row = c.statement(internal::sqlite::sql::kReleasedAlready);
          row.bind(1, key).bind(2, token);
          already = row.step();
        }
        tx.commit();
        return std::make_pair(changed || already, changed);
      });
  // After COMMIT and outside the connection mutex: a woken waiter's attempt
  // sees the row free and does not wait for this store.
  if (freed) impl_->announce(key);
  return released;
}

std::optional<StoreTime> SqliteStore::extend(std::string_view key,
                                             std::string_view token,
                                             milliseconds ttl, LockMode mode) {
  return impl_->withConnection(
      "extending", [&](Connection& c) -> std::optional<StoreTime> {
        Transaction tx(c, Durability::kDurable);
        // The DBA's cap on leases (dlm_limits), as of this transaction.
        internal::checkTtlLimit(internal::sqlite::readLimits(c), ttl);
        // After BEGIN IMMEDIATE, which may have waited for the write lock.
        const std::int64_t expires = expiryMs(nowMs(), ttl);
        // Only while this acquisition still holds the key (expired but not
        // taken over counts: then the EXCLUSIVE row is still HELD with the
        // token, the SHARED hold's row still there).
        Statement update =
            mode == LockMode::SHARED
                ? c.statement(
                      "UPDATE dlm_shared_holds SET ttl_ms = ?3, "
                      "expires_at_ms = ?4 WHERE resource = ?1 AND token = ?2")
                : c.statement(
                      "UPDATE dlm_locks SET ttl_ms = ?3, expires_at_ms = ?4 "
                      "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'");
        update.bind(1, key)
            .bind(2, token)
            .bind(3, static_cast<std::int64_t>(ttl.count()))
            .bind(4, expires)
            .run();
        const bool extended = sqlite3_changes(c.handle()) > 0;
        tx.commit();
        if (!extended) return std::nullopt;
        return fromMs(expires);
      });
}

// Every hold, as DLM_RECORD_COLUMNS and the mode (column 10): the EXCLUSIVE
// rows with status HELD and the SHARED hold rows (status HELD while they
// exist) whose key satisfies `where` (the same text for both tables), each
// key's EXCLUSIVE holder first ('EXCLUSIVE' < 'SHARED'), then the SHARED
// ones oldest (lowest fencing token) first. One statement: one snapshot.
#define DLM_HOLDS_WHERE(where)                                       \
  "SELECT " DLM_RECORD_COLUMNS                                       \
  ", 'EXCLUSIVE' FROM dlm_locks WHERE status = 'HELD' AND " where    \
  " UNION ALL SELECT resource, 'HELD', owner_id, fencing_token, "    \
  "acquired_at_ms, ttl_ms, expires_at_ms, holder_host, holder_pid, " \
  "holder_ip, 'SHARED' FROM dlm_shared_holds WHERE " where           \
  " ORDER BY 1, 11, 4"

namespace {

LockRecord readHold(const Statement& row, std::int64_t now) {
  LockRecord r = readRecord(row, now);
  r.mode = internal::sqlite::modeFromText(row.text(10));
  return r;
}

}  // namespace

std::vector<LockRecord> SqliteStore::holdersOf(std::string_view key) {
  return impl_->withConnection("listing holders", [&](Connection& c) {
    const std::int64_t now = nowMs();
    Statement rows = c.statement(DLM_HOLDS_WHERE("resource = ?1"));
    rows.bind(1, key);
    std::vector<LockRecord> out;
    while (rows.step()) out.push_back(readHold(rows, now));
    return out;
  });
}

std::optional<LockRecord> SqliteStore::describe(std::string_view key) {
  return impl_->withConnection(
      "describing", [&](Connection& c) -> std::optional<LockRecord> {
        const std::int64_t now = nowMs();
        // One statement reads one consistent snapshot; no transaction needed.
        // acquired_at_ms NULL: the row exists (an ancestor, or a blocked
        // attempt) but the key was never locked. (Not fencing_token = 0: since
        // schema version 3 a new row starts at the fencing floor.)
        Statement row =
            c.statement("SELECT " DLM_RECORD_COLUMNS
                        " FROM dlm_locks "
                        "WHERE resource = ?1 AND acquired_at_ms IS NOT NULL");
        row.bind(1, key);
        if (!row.step()) return std::nullopt;
        return readRecord(row, now);
      });
}

std::vector<LockRecord> SqliteStore::listHeld(std::string_view keyPrefix) {
  return impl_->withConnection("listing held locks", [&](Connection& c) {
    const std::int64_t now = nowMs();
    std::vector<LockRecord> out;
    const std::optional<std::string> end = prefixEnd(keyPrefix);
    // A primary-key range scan over the keys starting with the prefix, in
    // key order; without an upper bound (empty or all-0xFF prefix) a scan
    // from the prefix on, filtered below.
    Statement rows =
        end ? c.statement(DLM_HOLDS_WHERE("resource >= ?1 AND resource < ?2"))
            : c.statement(DLM_HOLDS_WHERE("resource >= ?1"));
    rows.bind(1, keyPrefix);
    if (end) rows.bind(2, *end);
    while (rows.step()) {
      LockRecord r = readHold(rows, now);
      if (r.key.compare(0, keyPrefix.size(), keyPrefix) == 0) {
        out.push_back(std::move(r));
      }
    }
    return out;
  });
}

std::vector<WaitRecord> SqliteStore::listWaiters(std::string_view keyPrefix) {
  return impl_->withConnection("listing waiters", [&](Connection& c) {
    const std::int64_t now = nowMs();
    std::vector<WaitRecord> out;
    const std::optional<std::string> end = prefixEnd(keyPrefix);
    // A range scan of the primary key (resource first), as for listHeld;
    // rows past their waiter's deadline no longer count.
    Statement rows =
        end ? c.statement(
                  "SELECT resource, owner_id, requested_at_ms, expires_at_ms, "
                  "mode, wait_until_ms FROM dlm_lock_requests "
                  "WHERE resource >= ?1 AND resource < ?2 "
                  "AND expires_at_ms > ?3 "
                  "ORDER BY resource, requested_at_ms, owner_id")
            : c.statement(
                  "SELECT resource, owner_id, requested_at_ms, expires_at_ms, "
                  "mode, wait_until_ms FROM dlm_lock_requests "
                  "WHERE resource >= ?1 AND expires_at_ms > ?3 "
                  "ORDER BY resource, requested_at_ms, owner_id");
    rows.bind(1, keyPrefix).bind(3, now);
    if (end) rows.bind(2, *end);
    while (rows.step()) {
      WaitRecord w;
      w.key = rows.text(0);
      if (w.key.compare(0, keyPrefix.size(), keyPrefix) != 0) continue;
      w.owner = rows.text(1);
      w.requestedAt = fromMs(rows.integer(2));
      w.expiresAt = fromMs(rows.integer(3));
      w.mode = internal::sqlite::modeFromText(rows.text(4));
      // NULL: no deadline recorded (none, or a library before schema 6).
      if (!rows.isNull(5)) w.deadline = fromMs(rows.integer(5));
      out.push_back(std::move(w));
    }
    return out;
  });
}

#undef DLM_HOLDS_WHERE

SchemaState SqliteStore::schemaState() { return impl_->schemaState(); }

// The rows purgeIdle may delete, ?1 = the idle cutoff (now - idleFor),
// ?2 = now, ?3 = the batch size:
// - idle since at least the cutoff: its lease ended by then
//   (expires_at_ms <= cutoff; a row released earlier has been FREE even
//   longer, one released after expiry was expired, which counts as idle), or
//   it was never acquired (an intention row of an ancestor or of a blocked
//   attempt: nothing protects anything through it);
// - not waited for by a live request row (its waiter will take it soon);
// - without SHARED holds: the purge deletes the stale ones first (those
//   expired by the cutoff, DLM_STALE_SHARED), a key with any hold left is
//   not idle (?4 = the shared holds' expiry that still counts: the cutoff
//   for a dry run, which deletes nothing first, and no bound when purging);
// in key order, so that successive batches walk the table the same way.
// A scan of the table (no index on expires_at_ms: acquisitions would pay for
// its upkeep on every write to serve an occasional admin call); the batch
// size bounds how long the write lock is held, not the scan's length.
#define DLM_IDLE_ROWS                                                        \
  "FROM dlm_locks AS l "                                                     \
  "WHERE (l.expires_at_ms <= ?1 "                                            \
  "       OR (l.acquired_at_ms IS NULL AND l.status = 'FREE')) "             \
  "AND NOT EXISTS (SELECT 1 FROM dlm_lock_requests AS r "                    \
  "                WHERE r.resource = l.resource AND r.expires_at_ms > ?2) " \
  "AND NOT EXISTS (SELECT 1 FROM dlm_shared_holds AS s "                     \
  "                WHERE s.resource = l.resource AND s.expires_at_ms > ?4) " \
  "ORDER BY l.resource LIMIT ?3"

// Request rows whose lease ended at least idleFor ago (?1 = the cutoff):
// their waiters crashed or left without unregistering (a live waiter renews
// its row every kRequestLease / 2). Oldest first, at most ?2; through the
// index dlm_lock_requests_expiry (schema version 5), so the cost is the
// batch's, not the table's.
#define DLM_ENDED_REQUESTS                            \
  "FROM dlm_lock_requests WHERE expires_at_ms <= ?1 " \
  "ORDER BY expires_at_ms LIMIT ?2"

// SHARED holds expired for at least idleFor (?1 = the cutoff), in key
// order, at most ?2. Their tokens are never above their key row's counter,
// so deleting them leaves the fencing floor rule to the key rows.
#define DLM_STALE_SHARED                             \
  "FROM dlm_shared_holds WHERE expires_at_ms <= ?1 " \
  "ORDER BY resource, token LIMIT ?2"

PurgeBatch SqliteStore::purgeIdle(std::chrono::milliseconds idleFor,
                                  int batchSize, bool dryRun) {
  if (idleFor.count() < 0 || batchSize <= 0) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("purgeIdle: idleFor must not be negative ({} ms) and "
                    "batchSize must be positive ({})",
                    idleFor.count(), batchSize));
  }
  // The cutoff, saturated: an idle age beyond the epoch leaves only the
  // never-acquired rows.
  auto cutoffAt = [&](std::int64_t now) {
    return idleFor.count() > now ? std::numeric_limits<std::int64_t>::min()
                                 : now - idleFor.count();
  };
  if (dryRun) {
    // One statement, one snapshot, no write lock: counts what a purge now
    // would delete and reports the floor unchanged.
    return impl_->withConnection("counting idle rows", [&](Connection& c) {
      const std::int64_t now = nowMs();
      // Ended requests, stale SHARED holds and the key rows idle once they
      // are gone, up to the batch size (a purge deletes the requests first,
      // then the holds, then key rows up to what is left of the batch).
      Statement count = c.statement(
          "SELECT (SELECT count(*) FROM (SELECT 1 " DLM_IDLE_ROWS
          ")) + (SELECT count(*) FROM (SELECT 1 FROM dlm_shared_holds "
          "WHERE expires_at_ms <= ?1 LIMIT ?3)) "
          "+ (SELECT count(*) FROM (SELECT 1 FROM dlm_lock_requests "
          "WHERE expires_at_ms <= ?1 LIMIT ?3)), "
          "(SELECT fencing_token FROM dlm_fencing_floor WHERE id = 1)");
      count.bind(1, cutoffAt(now))
          .bind(2, now)
          .bind(3, static_cast<std::int64_t>(batchSize))
          .bind(4, cutoffAt(now));
      if (!count.step()) c.fail(SQLITE_INTERNAL, "counting idle rows");
      PurgeBatch batch;
      batch.rows = std::min<std::int64_t>(count.integer(0), batchSize);
      batch.fencingFloor = count.integer(1);
      return batch;
    });
  }
  return impl_->withConnection("purging idle rows", [&](Connection& c) {
    // BEGIN IMMEDIATE: no acquisition runs between choosing the rows,
    // raising the floor and deleting them. Durable like an acquisition,
    // though losing it would be safe too (the rows would come back with
    // their tokens).
    Transaction tx(c, Durability::kDurable);
    const std::int64_t now = nowMs();  // after the wait for the write lock
    std::int64_t deleted = 0;
    // Ended requests first (as on PostgreSQL): they block nothing, and a
    // crashed fleet's leftovers go before anything else.
    {
      std::vector<std::pair<std::string, std::string>> ended;
      {
        Statement requests =
            c.statement("SELECT resource, owner_id " DLM_ENDED_REQUESTS);
        requests.bind(1, cutoffAt(now))
            .bind(2, static_cast<std::int64_t>(batchSize));
        while (requests.step()) {
          ended.emplace_back(requests.text(0), requests.text(1));
        }
      }
      for (const auto& [resource, owner] : ended) {
        c.statement(
             "DELETE FROM dlm_lock_requests "
             "WHERE resource = ?1 AND owner_id = ?2")
            .bind(1, resource)
            .bind(2, owner)
            .run();
      }
      deleted += static_cast<std::int64_t>(ended.size());
    }
    // Stale SHARED holds next, so that their keys can be idle below.
    std::vector<std::pair<std::string, std::string>> stale;
    if (deleted < batchSize) {
      Statement holds = c.statement("SELECT resource, token " DLM_STALE_SHARED);
      holds.bind(1, cutoffAt(now)).bind(2, batchSize - deleted);
      while (holds.step()) stale.emplace_back(holds.text(0), holds.text(1));
    }
    for (const auto& [resource, token] : stale) {
      c.statement(
           "DELETE FROM dlm_shared_holds WHERE resource = ?1 AND token = ?2")
          .bind(1, resource)
          .bind(2, token)
          .run();
    }
    deleted += static_cast<std::int64_t>(stale.size());
    const std::int64_t rowsLeft = batchSize - deleted;
    std::vector<std::string> keys;
    std::int64_t highest = 0;
    if (rowsLeft > 0) {
      Statement idle =
          c.statement("SELECT l.resource, l.fencing_token " DLM_IDLE_ROWS);
      // Any SHARED hold left (live, or stale beyond this batch) keeps its
      // key: no bound on its expiry counts.
      idle.bind(1, cutoffAt(now))
          .bind(2, now)
          .bind(3, rowsLeft)
          .bind(4, std::numeric_limits<std::int64_t>::min());
      while (idle.step()) {
        keys.push_back(idle.text(0));
        highest = std::max(highest, idle.integer(1));
      }
    }
    // The floor first: every row created from now on starts at it
    // (trigger dlm_locks_start_at_fencing_floor), so a deleted key's next
    // token is above every token it issued. Never lowered.
    c.statement(
         "UPDATE dlm_fencing_floor SET fencing_token = max(fencing_token, ?1) "
         "WHERE id = 1")
        .bind(1, highest)
        .run();
    for (const auto& key : keys) {
      c.statement("DELETE FROM dlm_locks WHERE resource = ?1")
          .bind(1, key)
          .run();
    }
    PurgeBatch batch;
    {
      Statement floor = c.statement(
          "SELECT fencing_token FROM dlm_fencing_floor WHERE id = 1");
      if (!floor.step()) {
        c.fail(SQLITE_CORRUPT,
               "reading dlm_fencing_floor (its one row is missing)");
      }
      batch.fencingFloor = floor.integer(0);
    }
    tx.commit();
    batch.rows = deleted + static_cast<std::int64_t>(keys.size());
    return batch;
  });
}

#undef DLM_IDLE_ROWS
#undef DLM_STALE_SHARED
#undef DLM_ENDED_REQUESTS

bool SqliteStore::forceRelease(std::string_view key) {
  const bool freed =
      impl_->withConnection("force-releasing", [&](Connection& c) {
        // Lazy like release: a lost force-release leaves the lock to its TTL.
        Transaction tx(c, Durability::kLazy);
        // Whoever holds it. The token stays, so a later takeover still makes
        // the old holder's release false.
        c.statement(
             "UPDATE dlm_locks SET status = 'FREE', "
             "expires_at_ms = min(expires_at_ms, ?2) "
             "WHERE resource = ?1 AND status = 'HELD'")
            .bind(1, key)
            .bind(2, nowMs())
            .run();
        bool changed = sqlite3_changes(c.handle()) > 0;
        // And every SHARED holder: their extensions and releases fail.
        c.statement("DELETE FROM dlm_shared_holds WHERE resource = ?1")
            .bind(1, key)
            .run();
        changed = sqlite3_changes(c.handle()) > 0 || changed;
        tx.commit();
        return changed;
      });
  if (freed) impl_->announce(key);
  return freed;
}

StoreTime SqliteStore::now() {
  // The application's clock: no I/O, but a closed store refuses like every
  // other call.
  impl_->throwIfClosed();
  return fromMs(nowMs());
}

#undef DLM_RECORD_COLUMNS

// --- The application's transaction --------------------------------------

void SqliteStore::commitLock(AppTransaction& tx, const StoreKey& key,
                             std::string_view token, LockMode mode) {
  const std::string& path = impl_->path();
  impl_->throwIfClosed();
  // channel() does not take the connection mutex once the store has opened
  // its connection (it has: the lock was acquired through it); waiting for
  // that mutex could stall, as another thread of this store may hold it
  // while its BEGIN IMMEDIATE waits for the application's write lock.
  sqlite3* db = internal::sqlite::appConnection(tx, "commitLock", path,
                                                impl_->channel());
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

int SqliteStore::cancelRequests(std::string_view key,
                                std::optional<std::string_view> owner) {
  const int removed =
      impl_->withConnection("cancelling requests", [&](Connection& c) {
        return internal::sqlite::cancelRequestsIn(c, key, owner);
      });
  // The key's other waiters may have been queued behind a removed request:
  // wake them like a release does, after COMMIT and outside the mutex.
  if (removed > 0) impl_->announce(key);
  return removed;
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
