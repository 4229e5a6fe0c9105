// dlmctl's commands. Each returns the process exit status; each throws
// UsageError for a bad command line and lets DLMException through (main
// prints both).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "options.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_store.h"
#include "dlm/lock_store_admin.h"

namespace dlm::cli {

int runExec(const GlobalOptions& global, const ExecOptions& options);
int runList(const GlobalOptions& global, const ListOptions& options);
int runShow(const GlobalOptions& global, const ShowOptions& options);
int runWaiters(const GlobalOptions& global, const ListOptions& options);
int runRelease(const GlobalOptions& global, const ReleaseOptions& options);
int runCancelWait(const GlobalOptions& global,
                  const CancelWaitOptions& options);
int runClients(const GlobalOptions& global, const ClientsOptions& options);
int runClientsBind(const GlobalOptions& global, const ClientsOptions& options);
int runClientsUnbind(const GlobalOptions& global,
                     const ClientsOptions& options);
int runPurge(const GlobalOptions& global, const PurgeOptions& options);
int runSchemaStatus(const GlobalOptions& global);
int runMigrate(const GlobalOptions& global, const MigrateOptions& options);
int runDemo(const GlobalOptions& global, const DemoOptions& options);
int runTop(const GlobalOptions& global, const TopOptions& options);

// `global` with its database settled: --db, else DLM_DATABASE_URL, else
// PostgreSQL when PG* variables name a server, else ./dlm.sqlite
// (dlm::defaultStoreUrl); dbNote says which database that is (never a
// password) and where the choice came from. A URL of no known form is a
// command-line mistake: UsageError naming the forms. Called once, before
// a command runs. Prints nothing.
GlobalOptions settleDatabase(GlobalOptions global);

// "dlmctl: database: NOTE" on stderr, at most once per process: at the
// start with --verbose, else before the first error (so that it says which
// database failed). Nothing before settleDatabase.
void announceDatabase(const GlobalOptions& global);
// A warning on stderr (not with --quiet) when --db itself holds a password,
// which every local user can read in the process list.
void warnOfPasswordOnCommandLine(const GlobalOptions& global);

// The database as people read it, once: "sqlite:/var/lib/x.sqlite
// (SQLite)", "postgresql://app@db:5432/orders (PostgreSQL, schema NAME)"
// (--schema), never with a password. `storeName` is LockStore::name().
// `extra`, when not empty, goes inside the parentheses ("schema version 5").
std::string databaseText(const GlobalOptions& global,
                         std::string_view storeName,
                         const std::string& extra = "");

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

// How a key stands to another on the hierarchy path (keys share a prefix
// ending at the separator '.').
enum class KeyRelation { SAME, ANCESTOR, DESCENDANT, UNRELATED };

// How `candidate` (a store key) stands to `key`.
KeyRelation relationOf(const StoreKey& key, const std::string& candidate);

// The StoreKey of a store key as list prints it ("DC#farm#client#id" or
// "XDC#client#id"), its ancestors and descendants by the default hierarchy
// rules (separator '.'). A key of no such form, or whose id has an empty
// segment (a manager with hierarchy off wrote it), is related only to
// itself.
StoreKey parseStoreKey(const std::string& storeKey);

// The hold among `holds` that blocks taking `key` in `mode`: a live hold of
// the key, an ancestor or a descendant that conflicts with `mode` (a SHARED
// request is blocked only by EXCLUSIVE holds, an EXCLUSIVE one by any); the
// key's own holds first, then ancestors root first, then descendants (in
// the order of `holds` within a level). nullopt when none does. No I/O.
std::optional<LockRecord> firstBlocker(const std::vector<LockRecord>& holds,
                                       const StoreKey& key, LockMode mode);

// The oldest request among `requests` of an owner other than `self` that
// conflicts with taking `key` in `mode` (same rule as firstBlocker), which
// fair queueing serves first. nullopt when none. No I/O.
std::optional<WaitRecord> oldestQueuedAhead(
    const std::vector<WaitRecord>& requests, const StoreKey& key, LockMode mode,
    const std::string& self);

// firstBlocker among the store's holds: reads the key's holders, then each
// ancestor's, then the descendants', stopping at the first level with a
// blocker. nullopt when nothing blocks. Reads only.
std::optional<LockRecord> findBlocker(LockStore& store, const StoreKey& key,
                                      LockMode mode);

// oldestQueuedAhead among the store's live requests on `key`'s path;
// `self` is the owner itself (compared as the store lists it).
// Reads only.
std::optional<WaitRecord> findQueuedAhead(LockStore& store, const StoreKey& key,
                                          LockMode mode,
                                          const std::string& self);

}  // namespace dlm::cli
