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

// The store named by --db / DLM_DATABASE_URL / the default, not initialized.
std::shared_ptr<LockStore> openCliStore(const GlobalOptions& global);

// A manager for --client / --farm on `store`, initialized (after applying
// migrations when `applyMigrations`).
std::unique_ptr<DistributedLockManager> openManager(
    const GlobalOptions& global, std::shared_ptr<LockStore> store,
    bool applyMigrations, const LockConfiguration& config = {});

// The schema version this build of dlm needs on `store` (its newest
// migration).
int schemaVersionFor(const LockStore& store);

}  // namespace dlm::cli
