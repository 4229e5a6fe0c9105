// What dlmctl's command line asks for, once parsed (command_line.h): the
// options every command shares and each command's own.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlm/lock.h"
#include "dlm/lock_mode.h"

namespace dlm::cli {

// A mistake on the command line that only a command can see (e.g. -n
// together with --wait): dlmctl prints it with the command's usage and exits
// with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How much dlmctl says on stderr besides errors: QUIET (-q) nothing,
// NORMAL what explains an outcome (a lock held elsewhere), VERBOSE (-v)
// also which database it uses and, in exec, the progress of a wait.
enum class Verbosity { QUIET, NORMAL, VERBOSE };

// The options every command takes.
struct GlobalOptions {
  std::string db;        // --db, else $DLM_DATABASE_URL, else the default
  std::string dbOrigin;  // where db came from, for messages
  // Set by settleDatabase: which database and why ("sqlite:dlm.sqlite
  // (from --db)"), never with a password.
  std::string dbNote;
  Verbosity verbosity = Verbosity::NORMAL;
  std::string schema;  // --schema (PostgreSQL only)
  std::string client = "dlmctl";
  std::string farm = kDefaultFarmId;  // the library's default (dlm/lock.h)
};

struct ExecOptions {
  std::string id;
  bool xdc = false;
  // -s/--shared; -x/-e/--exclusive (the default).
  LockMode mode = LockMode::EXCLUSIVE;
  std::chrono::milliseconds ttl{60000};
  // How long to wait for the lock; nullopt: until it is free (flock's
  // default). Zero: one attempt (-n).
  std::optional<std::chrono::milliseconds> wait;
  // SIGTERM to SIGKILL; at most maxKillAfter(ttl) (command_line.h).
  std::chrono::milliseconds killAfter{1000};
  int conflictExitCode = 75;
  // -v/--verbose (exec's own, or the program's): who holds the lock while
  // waiting, and progress.
  bool verbose = false;
  // How often --verbose reports a wait that goes on.
  std::chrono::milliseconds progressEvery{10000};
  // The program and its arguments (-c "cmd" becomes /bin/sh -c cmd).
  std::vector<std::string> command;
};

struct ListOptions {
  std::string prefix;
  bool json = false;
};

struct TopOptions {
  std::string prefix;
  // Between frames of the live view.
  std::chrono::milliseconds interval{1000};
  // One frame without terminal control codes, then exit.
  bool once = false;
  // With once: the frame as one JSON object.
  bool json = false;
};

struct ShowOptions {
  std::string key;  // a store key or a lock id
  bool xdc = false;
  bool json = false;
};

struct ReleaseOptions {
  std::string key;  // a store key or a lock id
  bool xdc = false;
  bool force = false;
};

// waiters cancel: the request rows of one key, one owner's or all.
struct CancelWaitOptions {
  std::string key;  // a store key or a lock id
  bool xdc = false;
  // --owner, as waiters lists it; nullopt with --all.
  std::optional<std::string> owner;
  bool all = false;
};

// clients (list), clients bind, clients unbind.
struct ClientsOptions {
  // The listing; bind and unbind: what --purge ended.
  bool json = false;
  std::string clientId;  // bind, unbind
  std::string role;      // bind
  // bind, unbind: purgeClient first.
  bool purge = false;
};

struct MigrateOptions {
  bool dryRun = false;
  // PostgreSQL: the roles a first migration grants to (dlm.client_role,
  // dlm.admin_role); needed, with both, or both in PGOPTIONS, when the
  // database has no dlm roles recorded yet (before schema version 3).
  std::string clientRole;
  std::string adminRole;
};

struct PurgeOptions {
  // Rows idle at least this long go.
  std::chrono::milliseconds idleFor{0};
  int batch = 500;
  bool dryRun = false;
};

struct DemoOptions {
  int workers = 4;
  int locks = 3;
  double seconds = 5;
  int holdMs = 20;
  int parentPercent = 10;
};

}  // namespace dlm::cli
