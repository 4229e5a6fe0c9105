// dlmctl: the operator's command line for dlm. Parses the command line
// (command_line.h) and runs one command; turns usage mistakes into exit
// status 2 and library errors into 1.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "command_line.h"
#include "commands.h"
#include "dlm/error.h"

namespace {

using dlm::cli::CommandLine;

int dispatch(const dlm::cli::GlobalOptions& global, const CommandLine& line) {
  const std::string& c = line.command;
  if (c == "exec") return dlm::cli::runExec(global, line.exec);
  if (c == "list") return dlm::cli::runList(global, line.list);
  if (c == "show") return dlm::cli::runShow(global, line.show);
  if (c == "waiters") return dlm::cli::runWaiters(global, line.list);
  if (c == "waiters cancel") {
    return dlm::cli::runCancelWait(global, line.cancelWait);
  }
  if (c == "release") return dlm::cli::runRelease(global, line.release);
  if (c == "clients") return dlm::cli::runClients(global, line.clients);
  if (c == "clients bind") {
    return dlm::cli::runClientsBind(global, line.clients);
  }
  if (c == "clients unbind") {
    return dlm::cli::runClientsUnbind(global, line.clients);
  }
  if (c == "purge") return dlm::cli::runPurge(global, line.purge);
  if (c == "schema status") return dlm::cli::runSchemaStatus(global);
  if (c == "migrate") return dlm::cli::runMigrate(global, line.migrate);
  if (c == "demo") return dlm::cli::runDemo(global, line.demo);
  if (c == "top") return dlm::cli::runTop(global, line.top);
  throw std::logic_error("dlmctl: no runner for command '" + c + "'");
}

std::optional<std::string> databaseUrlEnv() {
  const char* env = std::getenv("DLM_DATABASE_URL");
  if (env == nullptr) return std::nullopt;
  return std::string(env);
}

}  // namespace

int main(int argc, char** argv) {
  std::string command;
  // Settled once, here: demo's forked workers open the same database again
  // and must not announce it again. Empty until then (nothing to announce).
  dlm::cli::GlobalOptions global;
  try {
    dlm::cli::ParseOutcome parsed = dlm::cli::parseCommandLine(
        std::vector<std::string>(argv + 1, argv + argc), databaseUrlEnv());
    if (!parsed.run) {
      std::fputs(parsed.out.c_str(), stdout);
      std::fputs(parsed.err.c_str(), stderr);
      return parsed.exitStatus;
    }
    command = parsed.run->command;
    global = dlm::cli::settleDatabase(parsed.run->global);
    dlm::cli::warnOfPasswordOnCommandLine(global);
    if (global.verbosity == dlm::cli::Verbosity::VERBOSE) {
      dlm::cli::announceDatabase(global);
    }
    return dispatch(global, *parsed.run);
  } catch (const dlm::cli::UsageError& e) {
    // A mistake only the command could see (a database URL of no known
    // form): the mistake and where to read more.
    std::fprintf(stderr, "dlmctl: %s\nTry 'dlmctl help %s' for more.\n",
                 e.what(), command.c_str());
    return dlm::cli::kUsageExitStatus;
  } catch (const dlm::DLMException& e) {
    // The library's message names the lock and the cause; the code says
    // what kind of failure it is (for scripts grepping the output). Which
    // database failed comes first, even with --quiet: it is part of the
    // error.
    dlm::cli::announceDatabase(global);
    std::fprintf(stderr, "dlmctl: %s [%s]\n", e.what(),
                 std::string(dlm::toString(e.code())).c_str());
    return e.code() == dlm::ErrorCode::PERMISSION_DENIED
               ? dlm::cli::kPermissionDeniedExitStatus
               : 1;
  } catch (const std::exception& e) {
    // Anything else (no database file, out of memory, a system call
    // failing in demo) is still reported rather than aborting with a core
    // dump.
    dlm::cli::announceDatabase(global);
    std::fprintf(stderr, "dlmctl: %s\n", e.what());
    return 1;
  }
}
