// dlmctl's commands. Each returns the process exit status; each throws
// UsageError for a bad command line and lets DLMException through (main
// prints both).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_store.h"

namespace dlm::cli {

int runExec(const GlobalOptions& global, const ExecOptions& options);
int runList(const GlobalOptions& global, const ListOptions& options);
int runShow(const GlobalOptions& global, const ShowOptions& options);
int runWaiters(const GlobalOptions& global, const ListOptions& options);
int runRelease(const GlobalOptions& global, const ReleaseOptions& options);
int runPurge(const GlobalOptions& global, const PurgeOptions& options);
int runSchemaStatus(const GlobalOptions& global);
int runMigrate(const GlobalOptions& global, const MigrateOptions& options);
int runDemo(const GlobalOptions& global, const DemoOptions& options);

// `global` with its database settled: --db, else DLM_DATABASE_URL, else
// PostgreSQL when PG* variables name a server, else ./dlm.sqlite
// (dlm::defaultStoreUrl). Says on stderr which database that is (never a
// password) and where the choice came from. A URL of no known form is a
// command-line mistake: UsageError naming the forms. Called once, before
// a command runs.
GlobalOptions settleDatabase(GlobalOptions global);

// The store named by global.db (settled), not initialized.
std::shared_ptr<LockStore> openCliStore(const GlobalOptions& global);

// For commands that only read (list, release): an error saying that there
// is no database when global.db is a SQLite file that does not exist, so
// that opening it does not create an empty one. (A file removed between
// this check and the open is created; an operator's race, not a concern.)
void requireExistingDatabase(const GlobalOptions& global);

// For commands that only read or release: the store of an existing database
// (requireExistingDatabase) whose schema is at this build's version
// (initialize without migrations: SCHEMA_MISMATCH otherwise).
std::shared_ptr<LockStore> openExistingStore(const GlobalOptions& global);

// A manager for --client / --farm on `store`, initialized (after applying
// migrations when `applyMigrations`).
// `events` (may be null) receives the manager's events.
std::unique_ptr<DistributedLockManager> openManager(
    const GlobalOptions& global, std::shared_ptr<LockStore> store,
    bool applyMigrations, const LockConfiguration& config = {},
    std::shared_ptr<LockEventHandler> events = nullptr);

// The StoreKey of lock id `id` in the scope of --client and --farm (XDC
// with `xdc`). INVALID_ARGUMENT for an id the library would refuse.
StoreKey scopedKey(const GlobalOptions& global, const std::string& id,
                   bool xdc);

// The store key `target` names: a store key as list prints it ("DC#..." or
// "XDC#...") as it is, else a lock id in the scope of --client and --farm
// (XDC with `xdc`), built by the library's own rules.
std::string resolveStoreKey(const GlobalOptions& global,
                            const std::string& target, bool xdc);

// A live hold that blocks taking `key` in `mode`: a hold of the key, an
// ancestor or a descendant that conflicts with `mode` (a SHARED request is
// blocked only by EXCLUSIVE holds, an EXCLUSIVE one by any); the key's own
// holds first, then ancestors root first, then descendants. nullopt when
// nothing does. Reads only.
std::optional<LockRecord> findBlocker(LockStore& store, const StoreKey& key,
                                      LockMode mode);

// A live request of an owner other than `self` that conflicts with taking
// `key` in `mode` (same rule as findBlocker, for request rows): the oldest
// such request, which fair queueing serves first. nullopt when none. Reads
// only.
std::optional<WaitRecord> findQueuedAhead(LockStore& store, const StoreKey& key,
                                          LockMode mode,
                                          const std::string& self);

}  // namespace dlm::cli
