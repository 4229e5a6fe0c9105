// dlmctl's commands and options as CLI11 sees them (the Cli struct: which
// commands exist, which options each takes and where their values go), and
// the checks across a command's values that CLI11 cannot make. Used by
// command_line.cpp, which runs the parse and turns CLI11's errors, help and
// suggestions into a ParseOutcome.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "command_line.h"

namespace dlm::cli {

// The CLI11 application and the variables it fills.
struct Cli {
  CLI::App app{
      "Operate dlm locks: run commands under a lock, see and "
      "force-release locks, cancel waits, bind clients to roles, manage "
      "the schema.",
      "dlmctl"};
  CommandLine line;
  bool version = false;
  bool quiet = false;
  bool verbose = false;
  std::vector<std::string> helpTopic;
  double execTtl = 60;
  double execWait = 0;
  double execKillAfter = 1;
  double execProgress = 10;
  double topInterval = 1;
  bool execOnce = false;
  bool execShared = false;
  bool execExclusive = false;
  std::string execShell;
  std::vector<std::string> execCommand;
  std::string purgeIdleFor;
  std::string cancelOwner;
  CLI::App* exec = nullptr;
  CLI::App* waitersCancel = nullptr;
  CLI::App* help = nullptr;

  Cli();

  // A command `name` under `parent` (the program when null); global
  // options may follow the command word.
  CLI::App* command(const std::string& name, const std::string& what,
                    CLI::App* parent = nullptr);
  void addExec();
  void addListing();
  void addWaitersCancel(CLI::App* waiters);
  void addClients();
  void addAdmin();
  void addDemo();
  // The command named by `words` ("schema", "status"), or nullptr.
  CLI::App* find(const std::vector<std::string>& words);
  // The innermost command that was parsed (&app when none).
  CLI::App* parsed();
};

// `seconds`, fractional, rounded to milliseconds.
std::chrono::milliseconds fromSeconds(double seconds);

// Turns the values CLI11 filled for command `sub` into its options in
// cli.line; a mistake that only shows across options (or in a value's form)
// is a UsageError.
void finishCommand(Cli& cli, CLI::App* sub);

}  // namespace dlm::cli
