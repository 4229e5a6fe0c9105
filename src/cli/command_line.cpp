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

// The option `name` ("--lock", "-s") of `sub` or (fallthrough) of the
// commands above it; nullptr when none has it.
const CLI::Option* optionOf(const CLI::App* sub, const std::string& name) {
  for (const CLI::App* at = sub; at != nullptr; at = at->get_parent()) {
    if (const CLI::Option* o = at->get_option_no_throw(name)) return o;
  }
  return nullptr;
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

// The command `sub` names `name` ("status" under "schema"), or nullptr.
const CLI::App* subcommandOf(const CLI::App* sub, const std::string& name) {
  for (const CLI::App* c : sub->get_subcommands({})) {
    if (c->check_name(name)) return c;
  }
  return nullptr;
}

bool takesPositionals(const CLI::App* sub) {
  for (const CLI::Option* o : sub->get_options()) {
    if (o->get_positional()) return true;
  }
  return false;
}

ParseOutcome unknownOption(const CLI::App* sub, const CLI::App* root,
                           const std::string& name) {
  return mistake(
      sub, withSuggestion(
               fmt::format("unknown option '{}'{}", name,
                           sub == root ? std::string() : " for " + pathOf(sub)),
               name, optionNames(sub)));
}

ParseOutcome unknownCommand(const CLI::App* sub, const CLI::App* root,
                            const std::string& word) {
  return mistake(
      sub, withSuggestion(
               fmt::format("unknown command '{}'{}", word,
                           sub == root ? std::string() : " for " + pathOf(sub)),
               word, commandNames(sub)));
}

// A word CLI11 could not place: an unknown command, option or argument.
ParseOutcome unexpected(Cli& cli, const std::string& word) {
  CLI::App* sub = cli.parsed();
  if (isOptionWord(word)) {
    return unknownOption(sub, &cli.app, word.substr(0, word.find('=')));
  }
  if (!commandNames(sub).empty()) return unknownCommand(sub, &cli.app, word);
  return mistake(sub, fmt::format("unexpected argument '{}'", word));
}

// The words walked as CLI11 reads them, before it does: CLI11 reports some
// mistakes by a symptom rather than by the word (`exec --lokc a true`:
// "--lock is required"; `schema stauts`: "which schema?"), and exec's
// command must be told apart from exec's options.
struct WordWalk {
  // The first word no command or option in its place knows, as a mistake
  // with a suggestion.
  std::optional<ParseOutcome> mistake;
  // Index of exec's first command word (not after a "--"), when there is
  // one.
  std::optional<std::size_t> execCommand;
};

WordWalk walkWords(const std::vector<std::string>& args, Cli& cli) {
  WordWalk walk;
  const CLI::App* at = &cli.app;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    // Everything after "--" is an argument (exec: the command).
    if (w == "--") return walk;
    if (isOptionWord(w)) {
      if (w.compare(0, 2, "--") == 0) {
        const std::size_t eq = w.find('=');
        const std::string name = w.substr(0, eq);
        const CLI::Option* o = optionOf(at, name);
        if (o == nullptr) {
          walk.mistake = unknownOption(at, &cli.app, name);
          return walk;
        }
        if (eq == std::string::npos && o->get_items_expected_min() > 0) ++i;
        continue;
      }
      // Short options, bundled as flock takes them ("-sn"); one that takes
      // a value takes the rest of the word ("-w0.5"), or the next word.
      for (std::size_t c = 1; c < w.size(); ++c) {
        const std::string name = std::string("-") + w[c];
        const CLI::Option* o = optionOf(at, name);
        if (o == nullptr) {
          walk.mistake = unknownOption(at, &cli.app, c == 1 ? w : name);
          return walk;
        }
        if (o->get_items_expected_min() > 0) {
          if (c + 1 == w.size()) ++i;
          break;
        }
      }
      continue;
    }
    if (const CLI::App* sub = subcommandOf(at, w)) {
      at = sub;
      continue;
    }
    if (at == cli.exec) {
      walk.execCommand = i;
      return walk;
    }
    // A command with subcommands and no arguments of its own ("schema",
    // "waiters", "clients", the program): the word is a misspelt command.
    if (!commandNames(at).empty() && !takesPositionals(at)) {
      walk.mistake = unknownCommand(at, &cli.app, w);
      return walk;
    }
  }
  return walk;
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
  const CLI::App* at = &cli.app;
  std::string known;  // the words of `topic` found so far
  for (const std::string& w : topic) {
    const CLI::App* sub = subcommandOf(at, w);
    if (sub == nullptr) {
      std::string what = fmt::format("no command '{}{}'", known, w);
      if (auto near = closestName(w, commandNames(at))) {
        what += fmt::format("; did you mean '{}{}'?", known, *near);
      }
      // The program's usage and 'dlmctl help': the list of commands.
      return mistake(&cli.app, what);
    }
    known += w + " ";
    at = sub;
  }
  ParseOutcome out;
  out.out = helpOf(at);
  return out;
}

}  // namespace

ParseOutcome parseCommandLine(
    std::vector<std::string> args,
    const std::optional<std::string>& databaseUrlEnv) {
  Cli cli;
  const WordWalk walk = walkWords(args, cli);
  if (walk.mistake) return *walk.mistake;
  // exec's command line is the command's own: a "--" before its first
  // word keeps every later option from dlmctl (`exec --lock x echo --db
  // oops`).
  if (walk.execCommand) {
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(*walk.execCommand),
                "--");
  }
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
