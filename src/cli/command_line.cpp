#include "command_line.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "command_help.h"
#include "suggest.h"
#include "dlm/store_url.h"
#include "dlm/version.h"

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;

// A range check without "in [min - max]" in the help (the option's
// description says what matters). Not CLI::Range: "nan" passes it (every
// comparison with NaN is false).
template <typename T>
CLI::Validator range(T min, T max) {
  return CLI::Validator(
      [min, max](std::string& input) {
        char* end = nullptr;
        const double value = std::strtod(input.c_str(), &end);
        const bool number = !input.empty() && end != nullptr && *end == '\0';
        if (number && !std::isnan(value) && value >= static_cast<double>(min) &&
            value <= static_cast<double>(max)) {
          return std::string();
        }
        return fmt::format("Value {} not in range {} to {}", input, min, max);
      },
      "");
}

milliseconds fromSeconds(double seconds) {
  return milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

// The CLI11 application and the variables it fills.
struct Cli {
  CLI::App app{
      "Operate dlm locks: run commands under a lock, see and "
      "force-release locks, manage the schema.",
      "dlmctl"};
  CommandLine line;
  bool version = false;
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
  CLI::App* exec = nullptr;
  CLI::App* help = nullptr;

  Cli() {
    // A repeated option: the last one wins (as in most Unix tools).
    app.option_defaults()->multi_option_policy(
        CLI::MultiOptionPolicy::TakeLast);
    app.footer(kProgramFooter);
    app.get_formatter()->column_width(30);
    app.add_option("--db", line.global.db,
                   "database: postgresql://... URI, libpq keyword string "
                   "(\"host=h dbname=d\"), sqlite:PATH or sqlite::memory: "
                   "(default: $DLM_DATABASE_URL, else PostgreSQL when PGHOST, "
                   "PGHOSTADDR, PGDATABASE or PGSERVICE is set, else "
                   "sqlite:dlm.sqlite)")
        ->type_name("URL");
    app.add_option("--schema", line.global.schema,
                   "PostgreSQL schema of dlm's tables (default: search_path)")
        ->type_name("NAME");
    app.add_option("--client", line.global.client,
                   "clientId of the locks (default \"dlmctl\")")
        ->type_name("ID");
    app.add_option("--farm", line.global.farm,
                   "farmId of DC locks (default \"default\")")
        ->type_name("ID");
    app.add_flag("--version", version, "print the versions and exit");
    app.require_subcommand(0, 1);

    addExec();
    addListing();
    addAdmin();
    addDemo();
    help = command("help", "show the help of dlmctl or of a command");
    help->add_option("command", helpTopic, "the command")
        ->type_name("CMD")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }

  CLI::App* command(const std::string& name, const std::string& what,
                    CLI::App* parent = nullptr) {
    CLI::App* sub =
        (parent != nullptr ? parent : &app)->add_subcommand(name, what);
    // Global options may also follow the command word.
    sub->fallthrough();
    return sub;
  }

  void addExec() {
    exec = command("exec",
                   "run a command while holding a lock (flock(1) "
                   "for a cluster)");
    exec->footer(kExecFooter);
    ExecOptions& o = line.exec;
    exec->add_option("--lock", o.id, "the lock id")
        ->type_name("ID")
        ->required();
    exec->add_flag("--xdc", o.xdc, "an XDC lock (no farm)");
    auto* shared = exec->add_flag("-s,--shared", execShared,
                                  "take the lock SHARED: beside other "
                                  "--shared holders (readers)");
    exec->add_flag("-x,-e,--exclusive", execExclusive,
                   "take the lock EXCLUSIVE (the default)")
        ->excludes(shared);
    exec->add_option("--ttl", execTtl, "lease length in seconds (default 60)")
        ->type_name("S")
        ->check(range(0.001, 86400.0));
    auto* wait =
        exec->add_option("-w,--wait,--timeout", execWait,
                         "wait at most S seconds, fractional (default: "
                         "until the lock is free)")
            ->type_name("S")
            ->check(range(0.0, 31536000.0));
    exec->add_flag("-n,--nonblock", execOnce,
                   "one attempt; fail at once when the lock is held")
        ->excludes(wait);
    exec->add_option("-E,--conflict-exit-code", o.conflictExitCode,
                     "exit status when the lock is held elsewhere (default "
                     "75)")
        ->type_name("N")
        ->check(range(0, 255));
    exec->add_option("--kill-after", execKillAfter,
                     "SIGTERM to SIGKILL after a lost lock, seconds (default "
                     "1; at most half of a tenth of the TTL)")
        ->type_name("S")
        ->check(range(0.0, 3600.0));
    exec->add_option("-c,--command", execShell,
                     "run this shell command (/bin/sh -c) instead of COMMAND")
        ->type_name("CMD");
    exec->add_flag("-v,--verbose", o.verbose,
                   "say who holds the lock while waiting, and progress");
    exec->add_option("--progress-every", execProgress,
                     "seconds between --verbose reports of a long wait "
                     "(default 10)")
        ->type_name("S")
        ->check(range(0.1, 86400.0));
    exec->add_option("COMMAND", execCommand, "the command and its arguments")
        ->type_name("")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }

  void addListing() {
    CLI::App* list = command("list", "list held locks and their waiters");
    list->footer(kListFooter);
    list->add_option("--prefix", line.list.prefix,
                     "only store keys starting with P "
                     "(e.g. \"DC#default#dlmctl#jobs.\")")
        ->type_name("P");
    list->add_flag("--json", line.list.json, "a JSON array");

    CLI::App* show = command("show", "show one lock: holder and waiters");
    show->footer(kShowFooter);
    show->add_option("KEY", line.show.key, "store key or lock id")->required();
    show->add_flag("--xdc", line.show.xdc, "KEY is an XDC lock id");
    show->add_flag("--json", line.show.json, "a JSON object");

    CLI::App* waiters = command("waiters", "list waiting lock requests");
    waiters->footer(kWaitersFooter);
    waiters
        ->add_option("--prefix", line.list.prefix, "only keys starting with P")
        ->type_name("P");
    waiters->add_flag("--json", line.list.json, "a JSON array");

    CLI::App* top = command("top",
                            "a live view of held locks and waiters, and who "
                            "blocks each waiter");
    top->footer(kTopFooter);
    top->add_option("--prefix", line.top.prefix,
                    "only store keys starting with P")
        ->type_name("P");
    top->add_option("--interval", topInterval,
                    "seconds between redraws, fractional (default 1)")
        ->type_name("S")
        ->check(range(0.1, 3600.0));
    top->add_flag("--once", line.top.once,
                  "print one frame, without terminal control codes, and exit");
    top->add_flag("--json", line.top.json,
                  "with --once: the frame as a JSON object");
  }

  void addAdmin() {
    CLI::App* release =
        command("release", "force-release a lock (operator override)");
    release->footer(kReleaseFooter);
    release->add_option("KEY", line.release.key, "store key or lock id")
        ->required();
    release->add_flag("--xdc", line.release.xdc, "KEY is an XDC lock id");
    release->add_flag("--force", line.release.force,
                      "required: free it whoever holds it");

    CLI::App* schema = command("schema", "inspect the database's schema");
    schema->require_subcommand(1);
    command("status", "schema version found, needed and pending migrations",
            schema)
        ->footer(kSchemaStatusFooter);

    CLI::App* purge =
        command("purge", "delete lock rows idle for a while (admin)");
    purge->footer(kPurgeFooter);
    purge->add_option("--idle-for", purgeIdleFor, "how long a row was idle")
        ->type_name("DURATION")
        ->required();
    purge
        ->add_option("--batch", line.purge.batch,
                     "rows per transaction (default 500)")
        ->type_name("N")
        ->check(range(1, 100000));
    purge->add_flag("--dry-run", line.purge.dryRun,
                    "only count what would be deleted");

    CLI::App* migrate =
        command("migrate", "apply the missing schema migrations");
    migrate->footer(kMigrateFooter);
    migrate->add_flag("--dry-run", line.migrate.dryRun,
                      "only list what would be applied");
  }

  void addDemo() {
    CLI::App* demo =
        command("demo",
                "worker processes contend for a few locks; checks that no "
                "two holders ever overlapped");
    demo->footer(kDemoFooter);
    DemoOptions& d = line.demo;
    demo->add_option("--workers", d.workers, "worker processes (default 4)")
        ->type_name("N")
        ->check(range(1, 64));
    demo->add_option("--locks", d.locks, "keys to contend for (default 3)")
        ->type_name("K")
        ->check(range(1, 1000));
    demo->add_option("--seconds", d.seconds,
                     "how long the workers run (default 5)")
        ->type_name("S")
        ->check(range(0.1, 3600.0));
    demo->add_option("--hold-ms", d.holdMs,
                     "how long each hold lasts (default 20)")
        ->type_name("M")
        ->check(range(0, 60000));
    demo->add_option("--parent-percent", d.parentPercent,
                     "share of attempts on the parent key (default 10)")
        ->type_name("P")
        ->check(range(0, 100));
  }

  // The command named by `words` ("schema", "status"), or nullptr.
  CLI::App* find(const std::vector<std::string>& words) {
    CLI::App* at = &app;
    for (const std::string& w : words) {
      at = at->get_subcommand_ptr(w).get();
      if (at == nullptr) return nullptr;
    }
    return at;
  }

  // The innermost command that was parsed (&app when none).
  CLI::App* parsed() {
    CLI::App* at = &app;
    for (;;) {
      const std::vector<CLI::App*> subs = at->get_subcommands();
      if (subs.empty()) return at;
      at = subs.front();
    }
  }
};

std::string pathOf(const CLI::App* sub);

// `sub`'s help, its usage line starting with the program's name (CLI11 2.1
// names only the subcommands there).
std::string helpOf(const CLI::App* sub,
                   CLI::AppFormatMode mode = CLI::AppFormatMode::Normal) {
  std::string text = sub->help("", mode);
  const std::string usage = "Usage: ";
  const std::size_t at = text.find(usage);
  if (sub->get_parent() != nullptr && at != std::string::npos) {
    text.insert(at + usage.size(), "dlmctl ");
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

// Turns the values CLI11 filled into the command's options; a mistake that
// only shows across options is a UsageError.
void finishExec(Cli& cli) {
  ExecOptions& o = cli.line.exec;
  o.ttl = fromSeconds(cli.execTtl);
  o.mode = cli.execShared ? LockMode::SHARED : LockMode::EXCLUSIVE;
  if (cli.execOnce) o.wait = milliseconds(0);
  if (cli.exec->count("--wait") > 0) o.wait = fromSeconds(cli.execWait);
  if (cli.exec->count("--kill-after") > 0) {
    o.killAfter = fromSeconds(cli.execKillAfter);
    o.killAfterGiven = true;
  }
  o.progressEvery = fromSeconds(cli.execProgress);
  if (cli.exec->count("--command") > 0) {
    if (!cli.execCommand.empty()) {
      throw UsageError(
          "give the command either with -c or after the "
          "options, not both");
    }
    o.command = {"/bin/sh", "-c", cli.execShell};
  } else {
    o.command = cli.execCommand;
  }
  if (o.command.empty()) {
    throw UsageError("exec needs a COMMAND (or -c \"shell command\")");
  }
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
    if (sub == cli.exec) finishExec(cli);
    if (sub->get_name() == "purge") {
      const auto idle = parseDuration(cli.purgeIdleFor);
      if (!idle) {
        throw UsageError(
            "--idle-for takes a duration such as 90s, 15m, "
            "12h or 7d, not '" +
            cli.purgeIdleFor + "'");
      }
      cli.line.purge.idleFor = *idle;
    }
    if (sub->get_name() == "top") {
      cli.line.top.interval = fromSeconds(cli.topInterval);
      if (cli.line.top.json && !cli.line.top.once) {
        throw UsageError("--json prints one frame: use it with --once");
      }
    }
    if (sub->get_name() == "release" && !cli.line.release.force) {
      throw UsageError(
          "release frees the lock whoever holds it; say so with --force");
    }
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
