// dlmctl: the operator's command line for dlm. Dispatches to one command;
// turns usage mistakes into exit status 2 and library errors into 1.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "dlm/error.h"

namespace {

using dlm::cli::Args;

int dispatch(const std::string& command, const dlm::cli::GlobalOptions& global,
             Args& args) {
  using Run = int (*)(const dlm::cli::GlobalOptions&, Args&);
  Run run = nullptr;
  if (command == "migrate") run = dlm::cli::runMigrate;
  if (command == "demo") run = dlm::cli::runDemo;
  if (command == "list") run = dlm::cli::runList;
  if (command == "release") run = dlm::cli::runRelease;
  if (command == "exec") run = dlm::cli::runExec;
  if (run == nullptr) {
    throw dlm::cli::UsageError("unknown command '" + command + "'");
  }
  // Once, here: demo's forked workers open the same database again and
  // must not announce it again.
  return run(dlm::cli::settleDatabase(global), args);
}

}  // namespace

int main(int argc, char** argv) {
  Args args(std::vector<std::string>(argv + 1, argv + argc));
  // exec's command line is the command's own: no option after its first word
  // is dlmctl's.
  args.keepCommandLineAfter("exec", dlm::cli::execValueOptions());
  std::string command;
  try {
    const dlm::cli::GlobalOptions global = dlm::cli::takeGlobalOptions(args);
    command = args.takePositional().value_or("");
    if (command == "help") {
      const std::string topic = args.takePositional().value_or("");
      const std::string usage = dlm::cli::commandUsage(topic);
      std::fputs(
          usage.empty() ? dlm::cli::programUsage().c_str() : usage.c_str(),
          stdout);
      return 0;
    }
    if (global.help) {
      const std::string usage = dlm::cli::commandUsage(command);
      std::fputs(
          usage.empty() ? dlm::cli::programUsage().c_str() : usage.c_str(),
          stdout);
      return 0;
    }
    if (command.empty()) throw dlm::cli::UsageError("no command given");
    return dispatch(command, global, args);
  } catch (const dlm::cli::UsageError& e) {
    // The mistake, the synopsis (the usage text up to its first blank line)
    // and where to read more.
    std::string usage = dlm::cli::commandUsage(command);
    const bool known = !usage.empty();
    if (!known) usage = dlm::cli::programUsage();
    usage = usage.substr(0, usage.find("\n\n") + 1);
    std::fprintf(stderr, "dlmctl: %s\n%sTry 'dlmctl help%s%s' for more.\n",
                 e.what(), usage.c_str(), known ? " " : "",
                 known ? command.c_str() : "");
    return 2;
  } catch (const dlm::DLMException& e) {
    // The library's message names the lock and the cause; the code says
    // what kind of failure it is (for scripts grepping the output).
    std::fprintf(stderr, "dlmctl: %s [%s]\n", e.what(),
                 std::string(dlm::toString(e.code())).c_str());
    return 1;
  } catch (const std::exception& e) {
    // Anything else (out of memory, a system call failing in demo) is still
    // reported rather than aborting with a core dump.
    std::fprintf(stderr, "dlmctl: %s\n", e.what());
    return 1;
  }
}
