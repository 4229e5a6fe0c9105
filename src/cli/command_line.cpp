#include "command_line.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "command_set.h"
#include "suggest.h"
#include "dlm/store_url.h"
#include "dlm/version.h"

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;

std::string pathOf(const CLI::App* sub);

// `sub`'s help, its usage line starting with the program's name and the
// commands above it ("dlmctl waiters cancel"; CLI11 2.1 names only the
// subcommand there).
std::string helpOf(const CLI::App* sub,
                   CLI::AppFormatMode mode = CLI::AppFormatMode::Normal) {
  std::string text = sub->help("", mode);
  const std::string usage = "Usage: ";
  const std::size_t at = text.find(usage);
  const CLI::App* parent = sub->get_parent();
  if (parent != nullptr && at != std::string::npos) {
    const std::string above = pathOf(parent);
    text.insert(at + usage.size(),
                above.empty() ? "dlmctl " : "dlmctl " + above + " ");
  }
  return text;
}

std::string pathOf(const CLI::App* sub) {
  std::string path;
  for (const CLI::App* at = sub; at != nullptr && at->get_parent() != nullptr;
       at = at->get_parent()) {
    path = path.empty() ? at->get_name() : at->get_name() + " " + path;
  }
  return path;
}

bool isOptionWord(const std::string& w) { return w.size() > 1 && w[0] == '-'; }

// Whether `word` (an option without "=value") takes the next word as its
// value, in `sub` or (fallthrough) its parents.
bool takesValue(const CLI::App* sub, const std::string& word) {
  for (const CLI::App* at = sub; at != nullptr; at = at->get_parent()) {
    if (const CLI::Option* o = at->get_option_no_throw(word)) {
      return o->get_items_expected_min() > 0;
    }
  }
  return false;
}

// Index of the first word from `from` on that is neither an option nor an
// option's value (for `sub`); args.size() when there is none or a "--"
// comes first.
std::size_t firstWord(const std::vector<std::string>& args, std::size_t from,
                      const CLI::App* sub) {
  std::size_t i = from;
  while (i < args.size() && isOptionWord(args[i])) {
    if (args[i] == "--") return args.size();
    const bool joined = args[i].find('=') != std::string::npos;
    i += !joined && takesValue(sub, args[i]) ? 2 : 1;
  }
  return std::min(i, args.size());
}

// exec's command line is the command's own: a "--" before its first word
// keeps every later option from dlmctl (`exec --lock x echo --db oops`).
void markExecCommand(std::vector<std::string>& args, Cli& cli) {
  const std::size_t word = firstWord(args, 0, &cli.app);
  if (word >= args.size() || args[word] != "exec") return;
  const std::size_t start = firstWord(args, word + 1, cli.exec);
  if (start >= args.size()) return;
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(start), "--");
}

std::vector<std::string> optionNames(const CLI::App* sub) {
  std::vector<std::string> names;
  for (const CLI::App* at = sub; at != nullptr; at = at->get_parent()) {
    for (const CLI::Option* o : at->get_options()) {
      for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
      for (const std::string& n : o->get_snames()) names.push_back("-" + n);
    }
  }
  return names;
}

std::vector<std::string> commandNames(const CLI::App* sub) {
  std::vector<std::string> names;
  for (const CLI::App* c : sub->get_subcommands({})) {
    names.push_back(c->get_name());
  }
  return names;
}

// The "Usage: ..." line of `sub`'s help.
std::string synopsis(const CLI::App* sub) {
  const std::string text = helpOf(sub);
  const std::size_t at = text.find("Usage:");
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at) + "\n";
}

ParseOutcome mistake(const CLI::App* sub, const std::string& what) {
  ParseOutcome out;
  out.exitStatus = kUsageExitStatus;
  const std::string path = pathOf(sub);
  out.err = fmt::format("dlmctl: {}\n{}Try 'dlmctl help{}{}' for more.\n", what,
                        synopsis(sub), path.empty() ? "" : " ", path);
  return out;
}

std::string withSuggestion(std::string what, const std::string& word,
                           const std::vector<std::string>& names) {
  if (auto near = closestName(word, names)) {
    what += fmt::format("; did you mean '{}'?", *near);
  }
  return what;
}

// A word CLI11 could not place: an unknown command, option or argument.
ParseOutcome unexpected(Cli& cli, const std::string& word) {
  CLI::App* sub = cli.parsed();
  if (isOptionWord(word)) {
    const std::string name = word.substr(0, word.find('='));
    return mistake(
        sub,
        withSuggestion(fmt::format("unknown option '{}'{}", name,
                                   sub == &cli.app ? std::string()
                                                   : " for " + pathOf(sub)),
                       name, optionNames(sub)));
  }
  const std::vector<std::string> commands = commandNames(sub);
  if (!commands.empty()) {
    return mistake(
        sub, withSuggestion(fmt::format("unknown command '{}'", word), word,
                            commands));
  }
  return mistake(sub, fmt::format("unexpected argument '{}'", word));
}

void finishDatabase(Cli& cli,
                    const std::optional<std::string>& databaseUrlEnv) {
  GlobalOptions& g = cli.line.global;
  if (cli.app.count("--db") > 0) {
    g.dbOrigin = "--db";
  } else if (databaseUrlEnv && !databaseUrlEnv->empty()) {
    g.db = *databaseUrlEnv;
    g.dbOrigin = "DLM_DATABASE_URL";
  } else {
    g.db = kDefaultStoreUrl;
    g.dbOrigin = "default";
  }
}

ParseOutcome helpFor(Cli& cli, const std::vector<std::string>& topic) {
  CLI::App* sub = cli.find(topic);
  if (sub == nullptr) {
    std::string words;
    for (const std::string& w : topic) words += (words.empty() ? "" : " ") + w;
    return mistake(&cli.app,
                   withSuggestion(fmt::format("no command '{}'", words),
                                  topic.back(), commandNames(&cli.app)));
  }
  ParseOutcome out;
  out.out = helpOf(sub);
  return out;
}

}  // namespace

ParseOutcome parseCommandLine(
    std::vector<std::string> args,
    const std::optional<std::string>& databaseUrlEnv) {
  Cli cli;
  markExecCommand(args, cli);
  // CLI11 takes the words last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    cli.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    ParseOutcome out;
    out.out = helpOf(cli.parsed());
    return out;
  } catch (const CLI::CallForAllHelp&) {
    ParseOutcome out;
    out.out = helpOf(&cli.app, CLI::AppFormatMode::All);
    return out;
  } catch (const CLI::ExtrasError&) {
    const std::vector<std::string> left = cli.app.remaining();
    return unexpected(cli, left.empty() ? std::string() : left.front());
  } catch (const CLI::RequiredError& e) {
    CLI::App* sub = cli.parsed();
    // A command that needs a subcommand ("schema") names its own mistake.
    if (sub != &cli.app && !sub->get_subcommands({}).empty()) {
      return mistake(
          sub, "which " + pathOf(sub) + "? (" +
                   fmt::format("{}", fmt::join(commandNames(sub), ", ")) + ")");
    }
    return mistake(sub, e.what());
  } catch (const CLI::ParseError& e) {
    return mistake(cli.parsed(), e.what());
  }

  CLI::App* sub = cli.parsed();
  if (cli.version) {
    ParseOutcome out;
    out.out = versionText();
    return out;
  }
  if (sub == &cli.app) return mistake(sub, "no command given");
  if (sub == cli.help) return helpFor(cli, cli.helpTopic);
  try {
    finishCommand(cli, sub);
  } catch (const UsageError& e) {
    return mistake(sub, e.what());
  }
  finishDatabase(cli, databaseUrlEnv);
  cli.line.command = pathOf(sub);
  ParseOutcome out;
  out.run = std::move(cli.line);
  return out;
}

std::optional<milliseconds> parseDuration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double unit = 1;  // seconds
  std::string number = text;
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "ms") == 0) {
    unit = 0.001;
    number.resize(number.size() - 2);
  } else if (!std::isdigit(static_cast<unsigned char>(text.back()))) {
    switch (text.back()) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return std::nullopt;
    }
    number.pop_back();
  }
  if (number.empty() ||
      number.find_first_not_of("0123456789.") != std::string::npos) {
    return std::nullopt;
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (*end != '\0' || !(value > 0) || value * unit > 3650.0 * 86400) {
    return std::nullopt;
  }
  return fromSeconds(value * unit);
}

std::string usageText(const std::string& command) {
  Cli cli;
  std::vector<std::string> words;
  for (std::size_t at = 0; at < command.size();) {
    const std::size_t end = std::min(command.find(' ', at), command.size());
    if (end > at) words.push_back(command.substr(at, end - at));
    at = end + 1;
  }
  const CLI::App* sub = cli.find(words);
  return helpOf(sub != nullptr ? sub : &cli.app);
}

std::string versionText() {
  return fmt::format(
      "dlmctl {0} (dlm library {0}; schema version needed: PostgreSQL {1}, "
      "SQLite {2})\n",
      version(), requiredSchemaVersion("postgres"),
      requiredSchemaVersion("sqlite"));
}

}  // namespace dlm::cli
