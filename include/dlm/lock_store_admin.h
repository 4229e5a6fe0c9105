// The store interface, inspection and admin side: reading the lock table
// for operators and tools, and the operator's overrides. The manager's
// describeLock/describeHolders use holdersOf; dlmctl uses the rest.
//
// For those who write a store or a tool (see dlm/lock_store.h, whose
// evolution rule applies here too). Application programs need not include
// this file: what they see of a lock's holders is dlm/lock_record.h.
//
// A store offers this side by deriving from LockStoreAdmin as well as
// LockStore and answering `this` from LockStore::admin(); callers reach it
// with adminOf(store). Same concurrency, time and error contract as
// LockStore. None of these calls is needed to take, keep or free a lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/error.h"
#include "dlm/lock_mode.h"
#include "dlm/lock_record.h"
#include "dlm/lock_store.h"

namespace dlm {

// One live request row: an acquireLock waiting for `key`.
struct WaitRecord {
  std::string key;
  std::string owner;
  StoreTime requestedAt;
  // The waiter's deadline; after it the row no longer counts.
  StoreTime expiresAt;
  LockMode mode = LockMode::EXCLUSIVE;
};

// One row of the schema-version table: a migration applied to the database.
struct AppliedMigration {
  int version = 0;
  std::string description;
  // As the database recorded it (text, UTC), for operators.
  std::string appliedAt;
  // CRC-32 of the migration file's text as dlm's own applier (initialize
  // with migrations, `dlmctl migrate`) ran it; nullopt when not recorded
  // (applied by hand with psql/sqlite3, or before schema version 3).
  std::optional<std::uint32_t> checksum;
};

// What the database's schema-version table says.
struct SchemaState {
  // False when the database has no dlm schema at all (no version table).
  bool present = false;
  // In version order.
  std::vector<AppliedMigration> applied;
  // The highest applied version; 0 when none.
  int version() const { return applied.empty() ? 0 : applied.back().version; }
  // The oldest library schema version this database still serves (the
  // rolling-upgrade rule, docs/dba.md): a library built for schema
  // version L accepts it when L == version(), or when
  // compatibleFrom <= L < version(). 0 when not recorded (before version 3):
  // only a library for exactly version() may use it.
  int compatibleFrom = 0;
};

// What purgeIdle did (or, dry, would do) in one batch.
struct PurgeBatch {
  // Rows deleted (dry run: rows that would be, up to the batch size).
  std::int64_t rows = 0;
  // The fencing high-water mark after the batch: every row created from now
  // on starts its tokens above it, so a purged key's tokens never go back.
  std::int64_t fencingFloor = 0;
};

class LockStoreAdmin {
 public:
  LockStoreAdmin() = default;
  LockStoreAdmin(const LockStoreAdmin&) = delete;
  LockStoreAdmin& operator=(const LockStoreAdmin&) = delete;
  virtual ~LockStoreAdmin() = default;

  // The lock table's row for `key` (its EXCLUSIVE state and fencing
  // counter), or nullopt if the key was never locked. SHARED holders are in
  // holdersOf.
  virtual std::optional<LockRecord> describe(std::string_view key) = 0;

  // Every hold of exactly `key` that was not released or taken over: the
  // EXCLUSIVE holder (status HELD) first, then the SHARED holders oldest
  // first; expired ones included (LockRecord::held tells).
  virtual std::vector<LockRecord> holdersOf(std::string_view key) = 0;

  // Every hold (EXCLUSIVE rows with status HELD, and SHARED holds) whose key
  // starts with `keyPrefix` (all when empty), in key order (for one key as
  // holdersOf), expired ones included (LockRecord::held tells).
  virtual std::vector<LockRecord> listHeld(std::string_view keyPrefix) = 0;

  // Live request rows (waiters whose deadline has not passed) whose key
  // starts with `keyPrefix` (all when empty), in key order, then oldest
  // first.
  virtual std::vector<WaitRecord> listWaiters(std::string_view keyPrefix) = 0;

  // Reads the schema-version table without changing anything (and without
  // creating a SQLite file's tables); needs no initialize(). Throws
  // CONNECTION_ERROR when the database cannot be reached.
  virtual SchemaState schemaState() = 0;

  // Admin: deletes up to `batchSize` rows that have been idle for at least
  // `idleFor` by the store's clock (FREE, or HELD but expired, since then;
  // intention-only rows), skipping rows that a live request waits for or
  // that another transaction has locked. Raises the fencing high-water mark
  // to the largest token deleted first, in the same transaction, so no key
  // ever sees a token again. One short transaction per call: callers loop
  // until rows < batchSize. Request rows whose lease ended at least
  // `idleFor` ago are deleted too, and counted in rows (PostgreSQL; the
  // SQLite store drops ended requests whenever a wait is registered). With
  // dryRun, counts instead of deleting. On
  // PostgreSQL it needs the admin role (dlm_admin); the application role
  // gets an error.
  virtual PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                               bool dryRun) = 0;

  // Operator override: frees the row whoever holds it. True if it was HELD.
  virtual bool forceRelease(std::string_view key) = 0;
};

// store.admin(), or DLMException INVALID_ARGUMENT naming the store when it
// has no inspection and admin side.
inline LockStoreAdmin& adminOf(LockStore& store) {
  if (LockStoreAdmin* a = store.admin()) return *a;
  throw DLMException(ErrorCode::INVALID_ARGUMENT,
                     "the " + std::string(store.name()) +
                         " store has no inspection and admin calls "
                         "(LockStore::admin() is null)");
}

}  // namespace dlm
