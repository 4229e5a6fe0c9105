// dlmctl's commands. Each returns the process exit status; each throws
// UsageError for a bad command line and lets DLMException through (main
// prints both).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "dlm/lock_manager.h"
#include "dlm/lock_store.h"

namespace dlm::cli {

int runMigrate(const GlobalOptions& global, Args& args);
int runDemo(const GlobalOptions& global, Args& args);
int runList(const GlobalOptions& global, Args& args);
int runRelease(const GlobalOptions& global, Args& args);
int runExec(const GlobalOptions& global, Args& args);
// The options of exec that take a value (for Args::keepCommandLineAfter).
std::vector<std::string> execValueOptions();

// The usage text of one command ("" for an unknown one), and of dlmctl.
std::string commandUsage(const std::string& command);
std::string programUsage();

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

// A manager for --client / --farm on `store`, initialized (after applying
// migrations when `applyMigrations`).
std::unique_ptr<DistributedLockManager> openManager(
    const GlobalOptions& global, std::shared_ptr<LockStore> store,
    bool applyMigrations, const LockConfiguration& config = {});

// The schema version this build of dlm needs on `store` (its newest
// migration).
int schemaVersionFor(const LockStore& store);

}  // namespace dlm::cli
