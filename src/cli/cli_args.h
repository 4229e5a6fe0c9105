// Command-line parsing for dlmctl: the global options every command shares
// and a small option reader for each command's own arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlm::cli {

// A mistake on the command line: dlmctl prints it with the command's usage
// and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The arguments after the program name, consumed piece by piece. Options
// are "--name value" or "--name=value" and may appear anywhere before a
// "--" argument; everything after "--" is positional.
class Args {
 public:
  explicit Args(std::vector<std::string> args);

  // Removes and returns the value of --name; nullopt when absent. Throws
  // UsageError when the option is given without a value. The last one wins
  // when repeated.
  std::optional<std::string> take(const std::string& name);
  // Removes --name (a flag without value); true when it was there.
  bool takeFlag(const std::string& name);
  // Removes and returns the first positional argument, if any.
  std::optional<std::string> takePositional();
  // Throws UsageError naming the first argument nobody consumed.
  void requireEmpty() const;
  // For a command that runs another program (exec): when the command word
  // (the first word that is neither an option nor the value of a global
  // option) is `command`, the first later word that is neither an option nor
  // the value of one in `valueOptions` starts the program's own command line,
  // which becomes positional as if a "--" stood before it. So in
  // "exec --lock x echo --db oops", "--db oops" stays echo's.
  void keepCommandLineAfter(const std::string& command,
                            const std::vector<std::string>& valueOptions);

 private:
  std::vector<std::string> args_;
  std::size_t end_;  // index of "--" (or size): options live before it
};

// Whole-number option values in [min, max]; UsageError otherwise.
std::int64_t parseInteger(const std::string& option, const std::string& text,
                          std::int64_t min, std::int64_t max);
// Decimal option values in [min, max]; UsageError otherwise.
double parseDecimal(const std::string& option, const std::string& text,
                    double min, double max);

// The options every command takes.
struct GlobalOptions {
  std::string db;        // --db, else $DLM_DATABASE_URL, else the default
  std::string dbOrigin;  // where db came from, for messages
  std::string schema;    // --schema (PostgreSQL only)
  std::string client = "dlmctl";
  std::string farm = "default";
  bool help = false;  // --help / -h
};

// Takes the global options out of `args`.
GlobalOptions takeGlobalOptions(Args& args);

}  // namespace dlm::cli
