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
// The calls added after the first release (cancelRequests, the client
// bindings, purgeClient) have default implementations (the evolution rule
// of dlm/lock_store.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/error.h"
#include "dlm/export.h"
#include "dlm/lock_mode.h"
#include "dlm/lock_record.h"
#include "dlm/lock_store.h"

namespace dlm {

// One live request row: an acquireLock waiting for `key`.
struct DLM_API WaitRecord {
  std::string key;
  std::string owner;
  StoreTime requestedAt;
  // The end of the request's lease (at most kRequestLease after its last
  // registration, renewed while the waiter waits); after it the row no
  // longer counts.
  StoreTime expiresAt;
  LockMode mode = LockMode::EXCLUSIVE;
  // The database login whose call recorded the request: as
  // LockRecord::login (PostgreSQL, admin role only; empty otherwise).
  std::string login;
  // The waiter's own deadline: when its acquireLock gives up (as it
  // registered it, WaitRequest::untilDeadline, on the store's clock);
  // nullopt when it waits without one, or did not say (a library before
  // PostgreSQL schema 18 / SQLite schema 6, a store that does not record
  // it). Unlike expiresAt, no rule reads it.
  std::optional<StoreTime> deadline = std::nullopt;
};

// One row of the schema-version table: a migration applied to the database.
struct DLM_API AppliedMigration {
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
struct DLM_API SchemaState {
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

// A clientId (key namespace) bound to a database role (listClients). Only a
// store with roles (PostgreSQL) binds clients: only logins that are members
// of the role may lock, wait for, release or inspect holders' secrets under
// the clientId.
struct DLM_API ClientBinding {
  std::string clientId;
  // The role the clientId is bound to.
  std::string role;
  // True: bound by its first use (to the login that used it first); false:
  // bound by an admin (bindClient).
  bool firstUse = false;
  // The login that bound it (the first user, or the admin).
  std::string boundBy;
  // By the store's clock.
  StoreTime boundAt;
  // The hierarchy separator recorded for the clientId; nullopt when none is
  // recorded.
  std::optional<char> separator;
  // Whether the clientId's locks form a hierarchy; nullopt until its first
  // acquire records it.
  std::optional<bool> hierarchy;
};

// What purgeIdle did (or, dry, would do) in one batch.
struct DLM_API PurgeBatch {
  // Rows deleted (dry run: rows that would be, up to the batch size).
  std::int64_t rows = 0;
  // The fencing high-water mark after the batch: every row created from now
  // on starts its tokens above it, so a purged key's tokens never go back.
  std::int64_t fencingFloor = 0;
};

// What purgeClient ended under one clientId.
struct DLM_API ClientPurge {
  // EXCLUSIVE holds force-released, live or expired.
  std::int64_t holds = 0;
  // SHARED holds deleted, live or expired.
  std::int64_t sharedHolds = 0;
  // Request rows (waiters) deleted.
  std::int64_t requests = 0;
};

class DLM_API LockStoreAdmin {
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
  // `idleFor` ago (a crashed waiter's) are deleted too, first, and counted
  // in rows (both stores; SQLite since schema version 5, and its
  // registerWait also drops ended requests). With dryRun, counts instead of
  // deleting. On
  // PostgreSQL it needs the admin role (dlm_admin); the application role
  // gets an error.
  virtual PurgeBatch purgeIdle(std::chrono::milliseconds idleFor, int batchSize,
                               bool dryRun) = 0;

  // Operator override: frees the row whoever holds it. True if it was HELD.
  virtual bool forceRelease(std::string_view key) = 0;

  // Operator override: deletes the request rows (waiters) of exactly `key`
  // (not of its ancestors or descendants); with `owner`, only that owner's
  // (the owner as listWaiters shows it). Returns how many rows were deleted.
  // Wakes the key's other waiters, which a deleted request may have held
  // back. A waiter whose request is deleted is not told: a waiting manager
  // records its request again at its next renewal (kRequestLease / 2), at
  // the back of the queue. On PostgreSQL it needs the admin role. The default
  // throws INTERNAL_ERROR naming the call (a store written before it existed).
  virtual int cancelRequests(std::string_view key,
                             std::optional<std::string_view> owner) {
    static_cast<void>(key);
    static_cast<void>(owner);
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "LockStoreAdmin::cancelRequests: this store does not "
                       "implement it");
  }

  // Client bindings (stores with roles; PostgreSQL). A store without roles
  // keeps the defaults, which throw INVALID_ARGUMENT saying that the store
  // has no roles and no client bindings (SQLite: whoever can write the file
  // can do everything).

  // Every bound clientId, in clientId order. Any role that may lock may
  // call it.
  virtual std::vector<ClientBinding> listClients() {
    throw noClientBindings("listClients");
  }

  // Admin: binds `clientId` to the existing role `role`, or rebinds it
  // (keeping its recorded hierarchy setting). INVALID_ARGUMENT for an empty
  // clientId or one containing '#', and for a role that does not exist.
  virtual void bindClient(std::string_view clientId, std::string_view role) {
    static_cast<void>(clientId);
    static_cast<void>(role);
    throw noClientBindings("bindClient");
  }

  // Admin: forgets `clientId`'s binding and its recorded hierarchy setting;
  // the next login that uses the clientId is bound to it. True if there was
  // a binding.
  virtual bool unbindClient(std::string_view clientId) {
    static_cast<void>(clientId);
    throw noClientBindings("unbindClient");
  }

  // Admin: ends everything made under `clientId` and forgets its recorded
  // hierarchy setting, keeping its binding: force-releases every EXCLUSIVE
  // hold (live or expired) of its keys (XDC#<clientId>#..., and
  // DC#<farm>#<clientId>#... of every farm), deletes its SHARED holds and
  // its request rows, and wakes the waiters that may now go on. One
  // transaction. The holders and waiters are not told: a holder's next
  // extend or release finds its lock lost (or, once the clientId is bound
  // to a role the holder's login is not a member of, PERMISSION_DENIED).
  // A login that may still use the clientId can take new holds right
  // after the purge (for a squatted clientId, see rebindClient).
  // INVALID_ARGUMENT for an empty clientId or one containing '#'.
  // PostgreSQL (schema version 17 on): needs the admin role.
  virtual ClientPurge purgeClient(std::string_view clientId) {
    static_cast<void>(clientId);
    throw noClientBindings("purgeClient");
  }

  // Admin: the remedy for a squatted clientId, in one transaction: binds
  // `clientId` to `role` (as bindClient), forgets its recorded hierarchy
  // setting, and ends the holds and requests under it that a login outside
  // `role` made (or that record no login: made before schema 17), as
  // purgeClient would. The role's members keep theirs, so a repeat is
  // safe (and ends a squatter's acquire that raced with the first run).
  // dlmctl clients bind CLIENT ROLE --purge. INVALID_ARGUMENT as
  // bindClient. PostgreSQL (schema version 17 on): needs the admin role.
  virtual ClientPurge rebindClient(std::string_view clientId,
                                   std::string_view role) {
    static_cast<void>(clientId);
    static_cast<void>(role);
    throw noClientBindings("rebindClient");
  }

 protected:
  // The client calls' default answer.
  static DLMException noClientBindings(std::string_view call) {
    return DLMException(ErrorCode::INVALID_ARGUMENT,
                        "LockStoreAdmin::" + std::string(call) +
                            ": this store has no roles and so no client "
                            "bindings");
  }
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
