#include "command_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "command_help.h"
#include "dlm/lock_configuration.h"

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

// Turns the values CLI11 filled into the command's options; a mistake that
// only shows across options is a UsageError.
void finishExec(Cli& cli) {
  ExecOptions& o = cli.line.exec;
  o.ttl = fromSeconds(cli.execTtl);
  o.mode = cli.execShared ? LockMode::SHARED : LockMode::EXCLUSIVE;
  if (cli.execOnce) o.wait = milliseconds(0);
  if (cli.exec->count("--wait") > 0) o.wait = fromSeconds(cli.execWait);
  const milliseconds killCap = maxKillAfter(o.ttl);
  if (cli.exec->count("--kill-after") > 0) {
    o.killAfter = fromSeconds(cli.execKillAfter);
    if (o.killAfter > killCap) {
      throw UsageError(fmt::format(
          "--kill-after {} is more than a lease of --ttl {} leaves (at most "
          "{} s: the command must be gone before the lease could end): give "
          "a longer --ttl or a shorter --kill-after",
          cli.execKillAfter, cli.execTtl,
          static_cast<double>(killCap.count()) / 1000));
    }
  } else {
    // The default second, or less for a lease under 20 s: what fits in the
    // keep-alive's own loss report (half its margin), so that a short
    // lease is not stopped early for a renewal that is merely slow.
    o.killAfter = std::min(o.killAfter, keepAliveLossMargin(o.ttl) / 2);
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

void finishCancelWait(Cli& cli) {
  // With fallthrough, waiters' own options would be taken silently.
  const CLI::App* waiters = cli.waitersCancel->get_parent();
  if (waiters->count("--prefix") > 0 || waiters->count("--json") > 0) {
    throw UsageError(
        "--prefix and --json are for listing waiters, not for cancel");
  }
  CancelWaitOptions& o = cli.line.cancelWait;
  if (cli.waitersCancel->count("--owner") > 0) {
    if (cli.cancelOwner.empty()) throw UsageError("--owner is empty");
    o.owner = cli.cancelOwner;
  } else if (!o.all) {
    throw UsageError(
        "say whose requests to remove: --owner OWNER (as 'dlmctl waiters' "
        "shows it), or --all");
  }
}

}  // namespace

milliseconds maxKillAfter(milliseconds ttl) {
  const milliseconds margin = keepAliveLossMargin(ttl);
  return std::max(margin / 2, ttl / 4 - margin);
}

milliseconds fromSeconds(double seconds) {
  return milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

Cli::Cli() {
  // A repeated option: the last one wins (as in most Unix tools).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
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
  auto* quietFlag = app.add_flag(
      "-q,--quiet", quiet,
      "say nothing on stderr but errors (and, with an error, the database)");
  app.add_flag("-v,--verbose", verbose,
               "also say on stderr which database is used and why (exec: "
               "who holds the lock while waiting)")
      ->excludes(quietFlag);
  app.add_flag("--version", version, "print the versions and exit");
  app.require_subcommand(0, 1);

  addExec();
  addListing();
  addAdmin();
  addDemo();
  help = command("help", "show the help of dlmctl or of a command");
  // Else CLI11 gives it the program's footer.
  help->footer(kHelpFooter);
  help->add_option("command", helpTopic, "the command")
      ->type_name("CMD")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

CLI::App* Cli::command(const std::string& name, const std::string& what,
                       CLI::App* parent) {
  CLI::App* sub =
      (parent != nullptr ? parent : &app)->add_subcommand(name, what);
  // Global options may also follow the command word.
  sub->fallthrough();
  return sub;
}

void Cli::addExec() {
  exec = command("exec",
                 "run a command while holding a lock (flock(1) "
                 "for a cluster)");
  exec->footer(kExecFooter);
  ExecOptions& o = line.exec;
  exec->add_option("--lock", o.id, "the lock id, or a key as printed")->type_name("ID")->required();
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
  auto* wait = exec->add_option("-w,--wait,--timeout", execWait,
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
                   "seconds from SIGTERM to SIGKILL when the lease is lost "
                   "or cannot be renewed in time (default 1, less for a TTL "
                   "under 20; at most a quarter of the TTL less a tenth of "
                   "it, the tenth at most 2 s: 13 for the default TTL)")
      ->type_name("S")
      ->check(range(0.0, 3600.0));
  exec->add_option("-c,--command", execShell,
                   "run this shell command (/bin/sh -c) instead of COMMAND")
      ->type_name("CMD");
  // The program's -v as well (it says which database, too): here so that
  // exec's help shows it.
  exec->add_flag("-v,--verbose", o.verbose,
                 "say which database, who holds the lock while waiting, and "
                 "progress");
  exec->add_option("--progress-every", execProgress,
                   "seconds between --verbose reports of a long wait "
                   "(default 10)")
      ->type_name("S")
      ->check(range(0.1, 86400.0));
  exec->add_option("COMMAND", execCommand, "the command and its arguments")
      ->type_name("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

void Cli::addListing() {
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

  CLI::App* waiters = command("waiters",
                              "list waiting lock requests (cancel: remove "
                              "them)");
  waiters->footer(kWaitersFooter);
  waiters->add_option("--prefix", line.list.prefix, "only keys starting with P")
      ->type_name("P");
  waiters->add_flag("--json", line.list.json, "a JSON array");
  addWaitersCancel(waiters);

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

void Cli::addWaitersCancel(CLI::App* waiters) {
  waitersCancel = command("cancel",
                          "remove a key's waiting requests (operator "
                          "override)",
                          waiters);
  waitersCancel->footer(kWaitersCancelFooter);
  CancelWaitOptions& o = line.cancelWait;
  waitersCancel->add_option("KEY", o.key, "store key or lock id")->required();
  waitersCancel->add_flag("--xdc", o.xdc, "KEY is an XDC lock id");
  auto* owner = waitersCancel
                    ->add_option("--owner", cancelOwner,
                                 "only this owner's request, as 'dlmctl "
                                 "waiters' shows it")
                    ->type_name("OWNER");
  waitersCancel->add_flag("--all", o.all, "every request for KEY")
      ->excludes(owner);
}

void Cli::addClients() {
  CLI::App* clients =
      command("clients",
              "list the clientIds bound to database roles (bind, "
              "unbind)");
  clients->footer(kClientsFooter);
  clients->add_flag("--json", line.clients.json, "a JSON array");
  CLI::App* bind =
      command("bind", "bind a clientId to a role (admin)", clients);
  bind->footer(kClientsBindFooter);
  bind->add_option("CLIENT", line.clients.clientId, "the clientId")->required();
  bind->add_option("ROLE", line.clients.role, "an existing role")->required();
  CLI::App* unbind =
      command("unbind", "forget a clientId's binding (admin)", clients);
  unbind->footer(kClientsUnbindFooter);
  unbind->add_option("CLIENT", line.clients.clientId, "the clientId")
      ->required();
  for (CLI::App* sub : {bind, unbind}) {
    sub->add_flag("--purge", line.clients.purge,
                  "first release CLIENT's holds, cancel its waiting requests "
                  "and forget its hierarchy setting");
    sub->add_flag("--json", line.clients.json,
                  "with --purge: what it ended, as a JSON object");
  }
}

void Cli::addAdmin() {
  CLI::App* release =
      command("release", "force-release a lock (operator override)");
  release->footer(kReleaseFooter);
  release->add_option("KEY", line.release.key, "store key or lock id")
      ->required();
  release->add_flag("--xdc", line.release.xdc, "KEY is an XDC lock id");
  release->add_flag("--force", line.release.force,
                    "required: free it whoever holds it");

  addClients();

  CLI::App* schema = command("schema", "inspect the database's schema");
  schema->footer(kSchemaFooter);
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

  CLI::App* migrate = command("migrate", "apply the missing schema migrations");
  migrate->footer(kMigrateFooter);
  migrate->add_flag("--dry-run", line.migrate.dryRun,
                    "only list what would be applied");
  migrate
      ->add_option("--client-role", line.migrate.clientRole,
                   "PostgreSQL: the applications' role a first migration "
                   "grants to (created NOLOGIN when missing)")
      ->type_name("ROLE");
  migrate
      ->add_option("--admin-role", line.migrate.adminRole,
                   "PostgreSQL: the operators' role (created NOLOGIN when "
                   "missing)")
      ->type_name("ROLE");
}

void Cli::addDemo() {
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
CLI::App* Cli::find(const std::vector<std::string>& words) {
  CLI::App* at = &app;
  for (const std::string& w : words) {
    // Not get_subcommand: it throws for a name it does not know.
    CLI::App* next = nullptr;
    for (CLI::App* c : at->get_subcommands({})) {
      if (c->check_name(w)) next = c;
    }
    if (next == nullptr) return nullptr;
    at = next;
  }
  return at;
}

// The innermost command that was parsed (&app when none).
CLI::App* Cli::parsed() {
  CLI::App* at = &app;
  for (;;) {
    const std::vector<CLI::App*> subs = at->get_subcommands();
    if (subs.empty()) return at;
    at = subs.front();
  }
}

void finishCommand(Cli& cli, CLI::App* sub) {
  if (sub == cli.exec) finishExec(cli);
  // exec's -v is the program's -v too.
  const bool verbose = cli.verbose || cli.line.exec.verbose;
  if (cli.quiet && verbose) {
    throw UsageError("--quiet and --verbose exclude each other");
  }
  cli.line.exec.verbose = verbose;
  cli.line.global.verbosity = cli.quiet ? Verbosity::QUIET
                              : verbose ? Verbosity::VERBOSE
                                        : Verbosity::NORMAL;
  if (sub == cli.waitersCancel) finishCancelWait(cli);
  if (sub->get_parent() != nullptr &&
      sub->get_parent()->get_name() == "clients" &&
      (sub->get_parent()->count("--json") > 0 || sub->count("--json") > 0) &&
      !cli.line.clients.purge) {
    throw UsageError(
        "--json is for listing clients, or with --purge for what " +
        sub->get_name() + " --purge ended");
  }
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
}

}  // namespace dlm::cli
