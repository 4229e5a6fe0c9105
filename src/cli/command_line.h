// dlmctl's command line: which command to run with which options (parsed
// with CLI11), or the text to print and the status to exit with instead
// (help, --version, a mistake).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace dlm::cli {

// Exit status of a command-line mistake.
constexpr int kUsageExitStatus = 2;
// Exit status when the database refused the login a privilege
// (PERMISSION_DENIED; EX_NOPERM of sysexits.h).
constexpr int kPermissionDeniedExitStatus = 77;

struct CommandLine {
  GlobalOptions global;
  // "exec", "list", "show", "waiters", "waiters cancel", "release",
  // "purge", "clients", "clients bind", "clients unbind", "schema status",
  // "migrate", "demo", "top".
  std::string command;
  ExecOptions exec;
  ListOptions list;  // list and waiters
  ShowOptions show;
  ReleaseOptions release;
  CancelWaitOptions cancelWait;
  ClientsOptions clients;
  MigrateOptions migrate;
  PurgeOptions purge;
  DemoOptions demo;
  TopOptions top;
};

struct ParseOutcome {
  // Set: run this command. Unset: print `out` to stdout and `err` to stderr
  // and exit with `exitStatus` (help and --version: 0; a mistake: 2, with
  // the mistake, a suggestion when a name was misspelt, and the command's
  // synopsis).
  std::optional<CommandLine> run;
  int exitStatus = 0;
  std::string out;
  std::string err;
};

// Parses the arguments after the program name. `databaseUrlEnv` is
// $DLM_DATABASE_URL (nullopt or empty when unset). In `exec`, everything
// from the first word that is neither an option nor an option's value on
// belongs to the command, as if "--" stood before it.
ParseOutcome parseCommandLine(std::vector<std::string> args,
                              const std::optional<std::string>& databaseUrlEnv);

// "500ms", "90s", "15m", "12h", "7d", "1.5h" or plain seconds ("3600") as a
// duration; nullopt when `text` is none of these or not positive.
std::optional<std::chrono::milliseconds> parseDuration(const std::string& text);

// The longest --kill-after exec honours with a lease of `ttl`: SIGKILL must
// land before the lease could end, and exec must start stopping the command
// that long before, without mistaking renewals on schedule (every third of
// the TTL) for a loss. A quarter of the TTL less the keep-alive's loss
// margin (dlm::keepAliveLossMargin: a tenth of the TTL, 20 ms to 2 s), and
// at least half that margin (13 s for a 60 s TTL, 0.9 s for 6 s).
std::chrono::milliseconds maxKillAfter(std::chrono::milliseconds ttl);

// The usage of `command` ("" or an unknown name: of dlmctl), as --help
// prints it.
std::string usageText(const std::string& command);

// The text --version prints: dlmctl's and the library's version and the
// schema version each store needs.
std::string versionText();

}  // namespace dlm::cli
