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
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "crc32.h"
#include "dlm/error.h"
#include "migration.h"
#include "sqlite/sqlite_connection.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::Durability;
using internal::sqlite::Statement;
using internal::sqlite::Transaction;
using std::chrono::milliseconds;

namespace {

// The latest instant a StoreTime can hold, in ms (system_clock counts
// nanoseconds on libstdc++: about the year 2262).
const std::int64_t kMaxMs = std::chrono::duration_cast<milliseconds>(
                                StoreTime::max().time_since_epoch())
                                .count();

StoreTime fromMs(std::int64_t ms) {
  return StoreTime(std::chrono::duration_cast<StoreTime::duration>(
      milliseconds(std::min(ms, kMaxMs))));
}

std::int64_t nowMs() {
  return std::chrono::floor<milliseconds>(std::chrono::system_clock::now())
      .time_since_epoch()
      .count();
}

// now + ttl, saturated so a huge TTL cannot overflow (it means "far future").
std::int64_t expiryMs(std::int64_t now, milliseconds ttl) {
  return ttl.count() >= kMaxMs - now ? kMaxMs : now + ttl.count();
}

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

std::string migrateHint(const std::string& path) {
  return fmt::format(
      "apply the migrations in migrations/sqlite/ with `dlmctl migrate --db "
      "{}` (or build the manager with applyMigrations)",
      path);
}

// Column list shared by describe and listHeld; readRecord reads it.
#define DLM_RECORD_COLUMNS                                              \
  "resource, status, owner_id, fencing_token, acquired_at_ms, ttl_ms, " \
  "expires_at_ms, holder_host, holder_pid"

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
  return r;
}

}  // namespace

class SqliteStore::Impl {
 public:
  explicit Impl(SqliteStoreOptions options) : options_(std::move(options)) {}

  // Runs fn(connection) with the store's mutex held, opening the connection
  // on first use.
  template <typename Fn>
  auto withConnection(Fn&& fn) {
    std::lock_guard<std::mutex> guard(mutex_);
    throwIfClosed();
    if (!connection_) {
      // Not kept when opening fails, so the next call tries again.
      connection_ =
          std::make_unique<Connection>(options_.path, options_.busyTimeout);
    }
    return fn(*connection_);
  }

  // Throws if close() was called; opens nothing.
  void requireOpen() {
    std::lock_guard<std::mutex> guard(mutex_);
    throwIfClosed();
  }

  void close() {
    std::lock_guard<std::mutex> guard(mutex_);
    closed_ = true;
    connection_.reset();
  }

 private:
  void throwIfClosed() const {
    if (closed_) {
      throw DLMException(
          ErrorCode::INTERNAL_ERROR,
          fmt::format("sqlite store '{}': store closed", options_.path));
    }
  }

  const SqliteStoreOptions options_;
  std::mutex mutex_;
  bool closed_ = false;
  std::unique_ptr<Connection> connection_;
};

namespace {

// The highest applied migration, 0 when the version table does not exist.
int schemaVersion(Connection& c) {
  // sqlite_master tells whether the table exists without provoking (and
  // then having to tell apart) a "no such table" error.
  Statement exists = c.statement(
      "SELECT count(*) FROM sqlite_master "
      "WHERE type = 'table' AND name = 'dlm_schema_version'");
  if (!exists.step() || exists.integer(0) == 0) return 0;
  Statement version =
      c.statement("SELECT coalesce(max(version), 0) FROM dlm_schema_version");
  version.step();
  return static_cast<int>(version.integer(0));
}

void applyMigrations(Connection& c, int from) {
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
      tx.commit();
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
  impl_->withConnection([&](Connection& c) {
    const auto& migrations = internal::sqliteMigrations();
    const int latest = internal::latestVersion(migrations);
    int current = schemaVersion(c);
    if (current < latest && applyMigrations) {
      dlm::applyMigrations(c, current);
      current = schemaVersion(c);
    }
    if (current == latest) return;
    if (current > latest) {
      throw DLMException(
          ErrorCode::SCHEMA_MISMATCH,
          fmt::format("sqlite store '{}': the database has dlm schema version "
                      "{}, newer than this library's {}; upgrade dlm",
                      c.path(), current, latest));
    }
    const auto missing =
        std::find_if(migrations.begin(), migrations.end(),
                     [&](const auto& m) { return m.version > current; });
    throw DLMException(
        ErrorCode::SCHEMA_MISMATCH,
        fmt::format("sqlite store '{}': {}; the database has dlm schema "
                    "version {}, this library needs {}: first missing "
                    "migrations/sqlite/{}; {}",
                    c.path(),
                    current == 0 ? "the dlm tables are missing"
                                 : "the dlm schema is out of date",
                    current, latest, missing->file, migrateHint(c.path())));
  });
}

void SqliteStore::close() { impl_->close(); }

AcquireResult SqliteStore::tryAcquire(const AcquireRequest& request) {
  return impl_->withConnection([&](Connection& c) {
    const StoreKey& key = request.key;
    AcquireResult result;
    Transaction tx(c, Durability::kDurable);
    // Read the clock once the write lock is ours: BEGIN IMMEDIATE may have
    // waited for it, and the lease starts now, not when we asked.
    const std::int64_t now = nowMs();

    // The rows must exist before they are checked and updated; ancestor rows
    // keep the table the same as PostgreSQL's (where they are row-locked).
    // An existing row is left untouched and costs no write.
    auto ensureRow = [&](const std::string& resource) {
      c.statement(
           "INSERT OR IGNORE INTO dlm_locks (resource, resource_crc) "
           "VALUES (?1, ?2)")
          .bind(1, resource)
          .bind(2, static_cast<std::int64_t>(internal::crc32(resource)))
          .run();
    };
    for (const auto& ancestor : key.ancestors) ensureRow(ancestor);
    ensureRow(key.key);

    // The target row as it is now: held by this very token (a retried
    // acquire), held by someone else, or takeable.
    std::int64_t fencing = 0;
    {
      Statement target = c.statement(
          "SELECT status, token, fencing_token, acquired_at_ms, expires_at_ms "
          "FROM dlm_locks WHERE resource = ?1");
      target.bind(1, key.key);
      if (!target.step()) c.fail(SQLITE_INTERNAL, "reading the inserted row");
      const bool held = target.text(0) == "HELD";
      fencing = target.integer(2);
      if (held && target.text(1) == request.token) {
        // Idempotent: the reply of an earlier attempt with this token was
        // lost; report that acquisition unchanged.
        result.acquired = true;
        result.fencingToken = fencing;
        result.acquiredAt = fromMs(target.integer(3));
        result.expiresAt = fromMs(target.integer(4));
      } else if (held && target.integer(4) > now) {
        result.blockedBy = key.key;
      }
    }
    if (result.acquired || !result.blockedBy.empty()) {
      tx.commit();  // keeps the inserted rows; nothing else changed
      return result;
    }

    // A held, unexpired ancestor covers this key; root first, so the report
    // names the outermost blocker.
    for (const auto& ancestor : key.ancestors) {
      Statement held = c.statement(
          "SELECT 1 FROM dlm_locks "
          "WHERE resource = ?1 AND status = 'HELD' AND expires_at_ms > ?2");
      held.bind(1, ancestor).bind(2, now);
      if (held.step()) {
        result.blockedBy = ancestor;
        tx.commit();
        return result;
      }
    }

    // A held, unexpired descendant: one range scan of the primary key over
    // [key + separator, key + separator + 1).
    if (!key.descendantsBegin.empty()) {
      Statement held = c.statement(
          "SELECT resource FROM dlm_locks "
          "WHERE resource >= ?1 AND resource < ?2 "
          "AND status = 'HELD' AND expires_at_ms > ?3 "
          "ORDER BY resource LIMIT 1");
      held.bind(1, key.descendantsBegin)
          .bind(2, key.descendantsEnd)
          .bind(3, now);
      if (held.step()) {
        result.blockedBy = held.text(0);
        tx.commit();
        return result;
      }
    }

    // Free (or expired): take it. The fencing token grows from the value
    // read above, which no one can change while this transaction holds the
    // write lock.
    const std::int64_t expires = expiryMs(now, request.ttl);
    c.statement(
         "UPDATE dlm_locks SET status = 'HELD', owner_id = ?2, token = ?3, "
         "fencing_token = ?4, acquired_at_ms = ?5, ttl_ms = ?6, "
         "expires_at_ms = ?7, holder_host = ?8, holder_pid = ?9, "
         "holder_ip = NULL "
         "WHERE resource = ?1")
        .bind(1, key.key)
        .bind(2, request.owner)
        .bind(3, request.token)
        .bind(4, fencing + 1)
        .bind(5, now)
        .bind(6, static_cast<std::int64_t>(request.ttl.count()))
        .bind(7, expires)
        .bind(8, request.holder.host)
        .bind(9, request.holder.pid)
        .run();
    tx.commit();
    result.acquired = true;
    result.fencingToken = fencing + 1;
    result.acquiredAt = fromMs(now);
    result.expiresAt = fromMs(expires);
    return result;
  });
}

bool SqliteStore::release(const StoreKey& storeKey, std::string_view token) {
  const std::string_view key = storeKey.key;
  return impl_->withConnection([&](Connection& c) {
    Transaction tx(c, Durability::kLazy);
    // Conditional on the acquisition's token: a holder whose lock expired
    // and was taken over cannot free the new holder's lock. The token stays
    // on the row so a retried release of the same acquisition is true again.
    c.statement(
         "UPDATE dlm_locks SET status = 'FREE' "
         "WHERE resource = ?1 AND token = ?2")
        .bind(1, key)
        .bind(2, token)
        .run();
    const bool freed = sqlite3_changes(c.handle()) > 0;
    tx.commit();
    return freed;
  });
}

std::optional<StoreTime> SqliteStore::extend(std::string_view key,
                                             std::string_view token,
                                             milliseconds ttl) {
  return impl_->withConnection([&](Connection& c) -> std::optional<StoreTime> {
    Transaction tx(c, Durability::kDurable);
    // After BEGIN IMMEDIATE, which may have waited for the write lock.
    const std::int64_t expires = expiryMs(nowMs(), ttl);
    // Only while this acquisition still holds the row (expired but not taken
    // over counts: then status is still HELD and the token unchanged).
    c.statement(
         "UPDATE dlm_locks SET ttl_ms = ?3, expires_at_ms = ?4 "
         "WHERE resource = ?1 AND token = ?2 AND status = 'HELD'")
        .bind(1, key)
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

std::optional<LockRecord> SqliteStore::describe(std::string_view key) {
  return impl_->withConnection([&](Connection& c) -> std::optional<LockRecord> {
    const std::int64_t now = nowMs();
    // One statement reads one consistent snapshot; no transaction needed.
    // fencing_token = 0: the row exists (an ancestor, or a blocked attempt)
    // but the key was never locked.
    Statement row = c.statement("SELECT " DLM_RECORD_COLUMNS
                                " FROM dlm_locks "
                                "WHERE resource = ?1 AND fencing_token > 0");
    row.bind(1, key);
    if (!row.step()) return std::nullopt;
    return readRecord(row, now);
  });
}

std::vector<LockRecord> SqliteStore::listHeld(std::string_view keyPrefix) {
  return impl_->withConnection([&](Connection& c) {
    const std::int64_t now = nowMs();
    std::vector<LockRecord> out;
    const std::optional<std::string> end = prefixEnd(keyPrefix);
    // A primary-key range scan over the keys starting with the prefix, in
    // key order; without an upper bound (empty or all-0xFF prefix) a scan
    // from the prefix on, filtered below.
    Statement rows =
        end ? c.statement("SELECT " DLM_RECORD_COLUMNS
                          " FROM dlm_locks "
                          "WHERE resource >= ?1 AND resource < ?2 "
                          "AND status = 'HELD' ORDER BY resource")
            : c.statement("SELECT " DLM_RECORD_COLUMNS
                          " FROM dlm_locks "
                          "WHERE resource >= ?1 AND status = 'HELD' "
                          "ORDER BY resource");
    rows.bind(1, keyPrefix);
    if (end) rows.bind(2, *end);
    while (rows.step()) {
      LockRecord r = readRecord(rows, now);
      if (r.key.compare(0, keyPrefix.size(), keyPrefix) == 0) {
        out.push_back(std::move(r));
      }
    }
    return out;
  });
}

bool SqliteStore::forceRelease(std::string_view key) {
  return impl_->withConnection([&](Connection& c) {
    // Lazy like release: a lost force-release leaves the lock to its TTL.
    Transaction tx(c, Durability::kLazy);
    // Whoever holds it. The token stays, so a later takeover still makes the
    // old holder's release false.
    c.statement(
         "UPDATE dlm_locks SET status = 'FREE' "
         "WHERE resource = ?1 AND status = 'HELD'")
        .bind(1, key)
        .run();
    const bool freed = sqlite3_changes(c.handle()) > 0;
    tx.commit();
    return freed;
  });
}

StoreTime SqliteStore::now() {
  // The application's clock: no I/O, but a closed store refuses like every
  // other call.
  impl_->requireOpen();
  return fromMs(nowMs());
}

#undef DLM_RECORD_COLUMNS

// TODO(issue 3): interim stubs until the store implements them.
void SqliteStore::releaseWithin(AppTransaction&, const StoreKey&, std::string_view) {
  throw DLMException(ErrorCode::INTERNAL_ERROR, "releaseWithin: not implemented yet");
}
WaitRegistration SqliteStore::registerWait(const WaitRequest&) { return {}; }
void SqliteStore::unregisterWait(std::string_view, std::string_view) {}
bool SqliteStore::subscribeReleases(ReleaseListener*) { return false; }
void SqliteStore::unsubscribeReleases(ReleaseListener*) {}

}  // namespace dlm
