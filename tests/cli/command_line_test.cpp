// dlmctl's command line (CLI11): what each command receives, and what a
// mistake, --help or --version print instead.
#include "command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dlm/dlm.h"
#include "dlm/lock_key.h"
#include "dlm/store_url.h"
#include "dlm/version.h"

namespace dlm::cli {
namespace {

using std::chrono::milliseconds;
using Words = std::vector<std::string>;

ParseOutcome parse(Words words, std::optional<std::string> env = std::nullopt) {
  return parseCommandLine(std::move(words), env);
}

CommandLine run(Words words) {
  ParseOutcome out = parse(words);
  EXPECT_TRUE(out.run.has_value()) << out.err;
  return out.run.value_or(CommandLine{});
}

TEST(CommandLine, ExecLeavesEverythingAfterTheCommandWordToTheCommand) {
  const CommandLine c =
      run({"exec", "--lock", "x", "echo", "--db", "oops", "-h", "--"});
  EXPECT_EQ(c.command, "exec");
  EXPECT_EQ(c.exec.id, "x");
  EXPECT_EQ(c.exec.command, (Words{"echo", "--db", "oops", "-h", "--"}));
  EXPECT_EQ(c.global.db, kDefaultStoreUrl);
  EXPECT_EQ(c.global.dbOrigin, "default");
}

TEST(CommandLine, ExecTakesGlobalAndOwnOptionsBeforeTheCommandWord) {
  const CommandLine c =
      run({"--db", "sqlite:a", "exec", "-w", "0.5", "--db=sqlite:b", "--lock",
           "x", "--ttl", "2.5", "--", "ls", "--", "--ttl", "3"});
  EXPECT_EQ(c.global.db, "sqlite:b");  // the last one wins
  EXPECT_EQ(c.global.dbOrigin, "--db");
  EXPECT_EQ(c.exec.wait, milliseconds(500));
  EXPECT_EQ(c.exec.ttl, milliseconds(2500));
  EXPECT_EQ(c.exec.command, (Words{"ls", "--", "--ttl", "3"}));
}

TEST(CommandLine, ExecWaitsLikeFlockByDefault) {
  EXPECT_FALSE(run({"exec", "--lock", "x", "true"}).exec.wait.has_value());
  EXPECT_EQ(run({"exec", "-n", "--lock", "x", "true"}).exec.wait,
            milliseconds(0));
  EXPECT_EQ(run({"exec", "--timeout=1.25", "--lock", "x", "true"}).exec.wait,
            milliseconds(1250));
  const ParseOutcome both =
      parse({"exec", "-n", "-w", "1", "--lock", "x", "true"});
  EXPECT_FALSE(both.run);
  EXPECT_EQ(both.exitStatus, kUsageExitStatus);
  EXPECT_NE(both.err.find("exclude"), std::string::npos) << both.err;
}

TEST(CommandLine, ExecIsExclusiveUnlessSharedLikeFlock) {
  EXPECT_EQ(run({"exec", "--lock", "x", "true"}).exec.mode,
            LockMode::EXCLUSIVE);
  for (const char* shared : {"-s", "--shared"}) {
    const CommandLine c = run({"exec", shared, "--lock", "x", "true"});
    EXPECT_EQ(c.exec.mode, LockMode::SHARED) << shared;
    EXPECT_EQ(c.exec.command, Words{"true"});
  }
  for (const char* exclusive : {"-x", "-e", "--exclusive"}) {
    EXPECT_EQ(run({"exec", exclusive, "--lock", "x", "true"}).exec.mode,
              LockMode::EXCLUSIVE)
        << exclusive;
  }
  // Bundled short flags, as flock takes them.
  const CommandLine bundled = run({"exec", "-sn", "--lock", "x", "true"});
  EXPECT_EQ(bundled.exec.mode, LockMode::SHARED);
  EXPECT_EQ(bundled.exec.wait, milliseconds(0));
  // After the command word, -s is the command's.
  const CommandLine after = run({"exec", "--lock", "x", "ls", "-s"});
  EXPECT_EQ(after.exec.mode, LockMode::EXCLUSIVE);
  EXPECT_EQ(after.exec.command, (Words{"ls", "-s"}));
  const ParseOutcome both = parse({"exec", "-s", "-x", "--lock", "x", "true"});
  EXPECT_FALSE(both.run);
  EXPECT_EQ(both.exitStatus, kUsageExitStatus);
  EXPECT_NE(both.err.find("exclude"), std::string::npos) << both.err;
  EXPECT_NE(parse({"help", "exec"}).out.find("--shared"), std::string::npos);
}

TEST(CommandLine, ExecHonoursKillAfterWithinWhatTheLeaseLeaves) {
  // A quarter of the TTL less the keep-alive's loss margin (a tenth of the
  // TTL, at most 2 s).
  EXPECT_EQ(maxKillAfter(milliseconds(60000)), milliseconds(13000));
  EXPECT_EQ(maxKillAfter(milliseconds(6000)), milliseconds(900));
  EXPECT_EQ(
      run({"exec", "--kill-after", "10", "--lock", "x", "true"}).exec.killAfter,
      milliseconds(10000));
  EXPECT_EQ(
      run({"exec", "--ttl", "6", "--kill-after", "0.9", "--lock", "x", "true"})
          .exec.killAfter,
      milliseconds(900));
  // The default second; less for a lease under 20 s (half the margin).
  EXPECT_EQ(run({"exec", "--lock", "x", "true"}).exec.killAfter,
            milliseconds(1000));
  EXPECT_EQ(run({"exec", "--ttl", "6", "--lock", "x", "true"}).exec.killAfter,
            milliseconds(300));
  const ParseOutcome tooLong =
      parse({"exec", "--ttl", "6", "--kill-after", "5", "--lock", "x", "t"});
  EXPECT_EQ(tooLong.exitStatus, kUsageExitStatus);
  EXPECT_NE(tooLong.err.find("at most 0.9 s"), std::string::npos)
      << tooLong.err;
  EXPECT_EQ(
      parse({"exec", "--kill-after", "14", "--lock", "x", "t"}).exitStatus,
      kUsageExitStatus);
}

TEST(CommandLine, ExecShellCommand) {
  const CommandLine c =
      run({"exec", "--lock", "x", "-c", "echo \"$DLM_LOCK_KEY\" | wc"});
  EXPECT_EQ(c.exec.command,
            (Words{"/bin/sh", "-c", "echo \"$DLM_LOCK_KEY\" | wc"}));
  const ParseOutcome twice = parse({"exec", "--lock", "x", "-c", "a", "b"});
  EXPECT_EQ(twice.exitStatus, kUsageExitStatus);
  EXPECT_NE(twice.err.find("not both"), std::string::npos) << twice.err;
  const ParseOutcome none = parse({"exec", "--lock", "x"});
  EXPECT_EQ(none.exitStatus, kUsageExitStatus);
  EXPECT_NE(none.err.find("needs a COMMAND"), std::string::npos) << none.err;
}

TEST(CommandLine, ExecOptionsAreChecked) {
  for (const Words& bad : {Words{"exec", "--lock", "x", "--ttl", "0", "t"},
                           Words{"exec", "--lock", "x", "-E", "256", "t"},
                           Words{"exec", "--lock", "x", "-w", "abc", "t"},
                           Words{"exec", "--lock", "x", "--ttl", "nan", "t"},
                           Words{"exec", "--lock", "x", "--ttl", "NaN", "t"},
                           Words{"exec", "--lock", "x", "-w", "nan", "t"},
                           Words{"exec", "--lock", "x", "--ttl", "1s", "t"},
                           Words{"exec", "true"}}) {
    const ParseOutcome out = parse(bad);
    EXPECT_FALSE(out.run) << bad.back();
    EXPECT_EQ(out.exitStatus, kUsageExitStatus);
    EXPECT_NE(out.err.find("Try 'dlmctl help exec'"), std::string::npos)
        << out.err;
  }
}

TEST(CommandLine, SuggestsTheNameMeant) {
  const ParseOutcome command = parse({"lsit"});
  EXPECT_EQ(command.exitStatus, kUsageExitStatus);
  EXPECT_NE(command.err.find("unknown command 'lsit'; did you mean 'list'?"),
            std::string::npos)
      << command.err;
  const ParseOutcome option = parse({"list", "--jsn"});
  EXPECT_NE(option.err.find("unknown option '--jsn' for list; did you mean "
                            "'--json'?"),
            std::string::npos)
      << option.err;
  const ParseOutcome far = parse({"frobnicate"});
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST(CommandLine, AnUnknownOptionBeforeExecsCommandIsAMistake) {
  const ParseOutcome typo = parse({"exec", "--lokc", "a", "true"});
  EXPECT_FALSE(typo.run);
  EXPECT_EQ(typo.exitStatus, kUsageExitStatus);
  EXPECT_NE(typo.err.find("unknown option '--lokc' for exec; did you mean "
                          "'--lock'?"),
            std::string::npos)
      << typo.err;
  for (const Words& bad :
       {Words{"exec", "--lock", "a", "--ttl=5", "--wiat", "3", "true"},
        Words{"exec", "-sz", "--lock", "a", "true"},
        Words{"--db", "sqlite:x", "exec", "--lock=a", "-lock", "b", "true"}}) {
    const ParseOutcome out = parse(bad);
    EXPECT_EQ(out.exitStatus, kUsageExitStatus) << bad[3];
    EXPECT_NE(out.err.find("unknown option"), std::string::npos) << out.err;
  }
  EXPECT_NE(parse({"exec", "-lock", "b", "true"}).err.find("'--lock'?"),
            std::string::npos);
  // After the command word (with or without "--"), options are the
  // command's, known to dlmctl or not.
  EXPECT_EQ(run({"exec", "--lock", "a", "ls", "-l", "--lokc"}).exec.command,
            (Words{"ls", "-l", "--lokc"}));
  EXPECT_EQ(run({"exec", "--lock", "a", "--", "ls", "-l"}).exec.command,
            (Words{"ls", "-l"}));
  EXPECT_EQ(run({"exec", "-w0.5", "--lock", "a", "ls"}).exec.wait,
            milliseconds(500));
}

TEST(CommandLine, SuggestsAtEveryLevelAndForEveryHelpTopic) {
  const auto suggests = [](const Words& words, const std::string& text) {
    const ParseOutcome out = parse(words);
    EXPECT_FALSE(out.run) << text;
    EXPECT_EQ(out.exitStatus, kUsageExitStatus) << out.err;
    EXPECT_NE(out.err.find(text), std::string::npos) << out.err;
    EXPECT_EQ(out.err.find("not found"), std::string::npos) << out.err;
  };
  suggests({"schema", "stauts"},
           "unknown command 'stauts' for schema; did you mean 'status'?");
  suggests({"waiters", "cancle", "k"}, "did you mean 'cancel'?");
  suggests({"show", "--jsn"},
           "unknown option '--jsn' for show; did you mean "
           "'--json'?");
  suggests({"waiters", "cancel", "k", "--al"}, "did you mean '--all'?");
  suggests({"list", "--quite"}, "did you mean '--quiet'?");
  suggests({"help", "lsit"}, "no command 'lsit'; did you mean 'list'?");
  suggests({"help", "schema", "stauts"},
           "no command 'schema stauts'; did you mean 'schema status'?");
  suggests({"help", "waiters", "cancle"}, "did you mean 'waiters cancel'?");
  suggests({"help", "nope"}, "dlmctl: no command 'nope'\n");
  // One letter is near every other one: no guess.
  EXPECT_EQ(parse({"list", "-z"}).err.find("did you mean"), std::string::npos);
}

TEST(CommandLine, EveryCommandsHelpHasItsOwnFooter) {
  const std::string program = parse({"--help"}).out;
  const std::string footer = "'dlmctl help COMMAND' or";
  ASSERT_NE(program.find(footer), std::string::npos) << program;
  for (const Words& topic :
       {Words{"exec"}, Words{"list"}, Words{"show"}, Words{"waiters"},
        Words{"waiters", "cancel"}, Words{"top"}, Words{"release"},
        Words{"clients"}, Words{"clients", "bind"}, Words{"clients", "unbind"},
        Words{"schema"}, Words{"schema", "status"}, Words{"purge"},
        Words{"migrate"}, Words{"demo"}, Words{"help"}}) {
    Words ask = {"help"};
    ask.insert(ask.end(), topic.begin(), topic.end());
    const std::string text = parse(ask).out;
    EXPECT_FALSE(text.empty()) << topic.back();
    EXPECT_EQ(text.find(footer), std::string::npos) << text;
  }
  // The application role gets 77 from purge, as from every refused call.
  EXPECT_NE(parse({"help", "purge"}).out.find("77"), std::string::npos);
}

TEST(CommandLine, QuietAndVerbose) {
  EXPECT_EQ(run({"list"}).global.verbosity, Verbosity::NORMAL);
  EXPECT_EQ(run({"-q", "list"}).global.verbosity, Verbosity::QUIET);
  EXPECT_EQ(run({"list", "--quiet"}).global.verbosity, Verbosity::QUIET);
  EXPECT_EQ(run({"list", "-v"}).global.verbosity, Verbosity::VERBOSE);
  // exec's -v is the program's, in either place.
  for (const Words& words :
       {Words{"exec", "-v", "--lock", "x", "true"},
        Words{"--verbose", "exec", "--lock", "x", "true"}}) {
    const CommandLine c = run(words);
    EXPECT_TRUE(c.exec.verbose);
    EXPECT_EQ(c.global.verbosity, Verbosity::VERBOSE);
  }
  const CommandLine quiet = run({"exec", "-q", "--lock", "x", "true"});
  EXPECT_FALSE(quiet.exec.verbose);
  EXPECT_EQ(quiet.global.verbosity, Verbosity::QUIET);
  for (const Words& both : {Words{"-q", "-v", "list"},
                            Words{"-q", "exec", "-v", "--lock", "x", "true"}}) {
    const ParseOutcome out = parse(both);
    EXPECT_EQ(out.exitStatus, kUsageExitStatus) << out.err;
  }
}

TEST(CommandLine, HelpAndVersion) {
  const ParseOutcome version = parse({"--version"});
  EXPECT_FALSE(version.run);
  EXPECT_EQ(version.exitStatus, 0);
  EXPECT_NE(version.out.find(std::string(dlm::version())), std::string::npos);
  EXPECT_NE(version.out.find("PostgreSQL " +
                             std::to_string(requiredSchemaVersion("postgres"))),
            std::string::npos)
      << version.out;
  for (const Words& ask : {Words{"help", "exec"}, Words{"exec", "--help"},
                           Words{"--db", "x", "exec", "-h"}}) {
    const ParseOutcome help = parse(ask);
    EXPECT_EQ(help.exitStatus, 0);
    EXPECT_NE(help.out.find("--kill-after"), std::string::npos) << help.out;
  }
  EXPECT_NE(parse({"help", "schema", "status"}).out.find("pending"),
            std::string::npos);
  // A subcommand's usage names the commands above it.
  EXPECT_NE(parse({"help", "schema", "status"})
                .out.find("Usage: dlmctl schema status"),
            std::string::npos);
  EXPECT_NE(parse({}).err.find("no command given"), std::string::npos);
}

TEST(CommandLine, AdminCommands) {
  const CommandLine list = run({"list", "--prefix", "DC#x", "--json"});
  EXPECT_EQ(list.command, "list");
  EXPECT_EQ(list.list.prefix, "DC#x");
  EXPECT_TRUE(list.list.json);
  const CommandLine show = run({"show", "--xdc", "jobs.a"});
  EXPECT_EQ(show.command, "show");
  EXPECT_EQ(show.show.key, "jobs.a");
  EXPECT_TRUE(show.show.xdc);
  EXPECT_EQ(run({"schema", "status"}).command, "schema status");
  EXPECT_TRUE(run({"migrate", "--dry-run"}).migrate.dryRun);
  EXPECT_TRUE(run({"release", "--force", "K"}).release.force);

  const ParseOutcome unforced = parse({"release", "K"});
  EXPECT_EQ(unforced.exitStatus, kUsageExitStatus);
  EXPECT_NE(unforced.err.find("--force"), std::string::npos) << unforced.err;
  const ParseOutcome schema = parse({"schema"});
  EXPECT_EQ(schema.exitStatus, kUsageExitStatus);
  EXPECT_NE(schema.err.find("status"), std::string::npos) << schema.err;
  EXPECT_EQ(parse({"demo", "--workers", "0"}).exitStatus, kUsageExitStatus);
}

TEST(CommandLine, WaitersCancelNamesOneOwnerOrAll) {
  const CommandLine one =
      run({"waiters", "cancel", "jobs.a", "--owner", "0a1b", "--xdc"});
  EXPECT_EQ(one.command, "waiters cancel");
  EXPECT_EQ(one.cancelWait.key, "jobs.a");
  EXPECT_TRUE(one.cancelWait.xdc);
  EXPECT_EQ(one.cancelWait.owner, std::optional<std::string>("0a1b"));
  EXPECT_FALSE(one.cancelWait.all);
  const CommandLine all =
      run({"--db", "sqlite:x", "waiters", "cancel", "--all", "DC#f#c#k"});
  EXPECT_EQ(all.cancelWait.key, "DC#f#c#k");
  EXPECT_TRUE(all.cancelWait.all);
  EXPECT_FALSE(all.cancelWait.owner.has_value());
  EXPECT_EQ(all.global.db, "sqlite:x");
  // Listing stays the command without a subcommand.
  const CommandLine list = run({"waiters", "--json"});
  EXPECT_EQ(list.command, "waiters");
  EXPECT_TRUE(list.list.json);

  const auto refused = [](const Words& words, const std::string& why) {
    const ParseOutcome out = parse(words);
    EXPECT_FALSE(out.run) << why;
    EXPECT_EQ(out.exitStatus, kUsageExitStatus) << why;
    EXPECT_NE(out.err.find(why), std::string::npos) << out.err;
    EXPECT_NE(out.err.find("Usage: dlmctl waiters cancel"), std::string::npos)
        << out.err;
  };
  refused({"waiters", "cancel", "k"}, "--owner OWNER");
  refused({"waiters", "cancel", "--all"}, "KEY");
  refused({"waiters", "cancel", "k", "--all", "--owner", "o"}, "excludes");
  refused({"waiters", "cancel", "k", "--owner", ""}, "--owner is empty");
  refused({"waiters", "cancel", "k", "--all", "--json"}, "not for cancel");
  refused({"waiters", "--prefix", "p", "cancel", "k", "--all"},
          "not for cancel");
  const ParseOutcome typo = parse({"waiters", "cancle", "k"});
  EXPECT_NE(typo.err.find("did you mean 'cancel'?"), std::string::npos)
      << typo.err;
  EXPECT_NE(parse({"help", "waiters", "cancel"}).out.find("--owner"),
            std::string::npos);
  EXPECT_NE(parse({"help", "waiters"}).out.find("cancel"), std::string::npos);
}

TEST(CommandLine, ClientsListsBindsAndUnbinds) {
  const CommandLine list = run({"clients", "--json"});
  EXPECT_EQ(list.command, "clients");
  EXPECT_TRUE(list.clients.json);
  const CommandLine bind = run({"clients", "bind", "orders", "orders_svc"});
  EXPECT_EQ(bind.command, "clients bind");
  EXPECT_EQ(bind.clients.clientId, "orders");
  EXPECT_EQ(bind.clients.role, "orders_svc");
  const CommandLine unbind =
      run({"clients", "unbind", "orders", "--db", "postgresql://"});
  EXPECT_EQ(unbind.command, "clients unbind");
  EXPECT_EQ(unbind.clients.clientId, "orders");
  EXPECT_EQ(unbind.global.db, "postgresql://");

  const ParseOutcome noRole = parse({"clients", "bind", "orders"});
  EXPECT_EQ(noRole.exitStatus, kUsageExitStatus);
  EXPECT_NE(noRole.err.find("ROLE"), std::string::npos) << noRole.err;
  EXPECT_NE(noRole.err.find("Usage: dlmctl clients bind"), std::string::npos)
      << noRole.err;
  EXPECT_EQ(parse({"clients", "unbind"}).exitStatus, kUsageExitStatus);
  EXPECT_EQ(parse({"clients", "unbind", "a", "b"}).exitStatus,
            kUsageExitStatus);
  const ParseOutcome json = parse({"clients", "bind", "a", "r", "--json"});
  EXPECT_EQ(json.exitStatus, kUsageExitStatus);
  EXPECT_NE(json.err.find("--json is for listing clients"), std::string::npos)
      << json.err;
  const CommandLine purgeBind =
      run({"clients", "bind", "orders", "orders_svc", "--purge", "--json"});
  EXPECT_EQ(purgeBind.command, "clients bind");
  EXPECT_TRUE(purgeBind.clients.purge);
  EXPECT_TRUE(purgeBind.clients.json);
  const CommandLine purgeUnbind = run({"clients", "unbind", "--purge", "a"});
  EXPECT_TRUE(purgeUnbind.clients.purge);
  EXPECT_FALSE(purgeUnbind.clients.json);
  EXPECT_FALSE(bind.clients.purge);
  EXPECT_EQ(parse({"clients", "unbind", "a", "--json"}).exitStatus,
            kUsageExitStatus);
  const ParseOutcome typo = parse({"clients", "bnd", "a", "r"});
  EXPECT_NE(typo.err.find("did you mean 'bind'?"), std::string::npos)
      << typo.err;
  EXPECT_NE(parse({"cleints"}).err.find("did you mean 'clients'?"),
            std::string::npos);
  EXPECT_NE(parse({"help", "clients", "bind"}).out.find("before"),
            std::string::npos);
}

TEST(CommandLine, PurgeTakesADuration) {
  const CommandLine c = run({"purge", "--idle-for", "7d", "--dry-run"});
  EXPECT_EQ(c.command, "purge");
  EXPECT_EQ(c.purge.idleFor, std::chrono::hours(24 * 7));
  EXPECT_TRUE(c.purge.dryRun);
  EXPECT_EQ(c.purge.batch, 500);
  EXPECT_EQ(parseDuration("90s"), milliseconds(90000));
  EXPECT_EQ(parseDuration("1.5h"), milliseconds(5400000));
  EXPECT_EQ(parseDuration("15m"), milliseconds(900000));
  EXPECT_EQ(parseDuration("3600"), milliseconds(3600000));
  EXPECT_EQ(parseDuration("1ms"), milliseconds(1));
  for (const char* bad :
       {"", "h", "ms", "0s", "-5m", "5x", "1e3s", "nan", "5 m", "5mss"}) {
    EXPECT_FALSE(parseDuration(bad)) << bad;
  }
  const ParseOutcome missing = parse({"purge"});
  EXPECT_EQ(missing.exitStatus, kUsageExitStatus);
  const ParseOutcome badDuration = parse({"purge", "--idle-for", "soon"});
  EXPECT_EQ(badDuration.exitStatus, kUsageExitStatus);
  EXPECT_NE(badDuration.err.find("duration"), std::string::npos)
      << badDuration.err;
}

TEST(CommandLine, TopRedrawsEverySecondUnlessToldOtherwise) {
  const CommandLine live = run({"top"});
  EXPECT_EQ(live.command, "top");
  EXPECT_EQ(live.top.interval, milliseconds(1000));
  EXPECT_FALSE(live.top.once);
  const CommandLine once =
      run({"top", "--once", "--json", "--prefix", "DC#", "--interval", "0.5"});
  EXPECT_TRUE(once.top.once);
  EXPECT_TRUE(once.top.json);
  EXPECT_EQ(once.top.prefix, "DC#");
  EXPECT_EQ(once.top.interval, milliseconds(500));
  // --json is one frame: without --once it is a mistake.
  const ParseOutcome json = parse({"top", "--json"});
  EXPECT_EQ(json.exitStatus, kUsageExitStatus);
  EXPECT_NE(json.err.find("--once"), std::string::npos) << json.err;
  EXPECT_EQ(parse({"top", "--interval", "0"}).exitStatus, kUsageExitStatus);
}

TEST(CommandLine, DatabaseFromTheEnvironmentUnlessGiven) {
  ParseOutcome env = parse({"list"}, std::string("sqlite:/tmp/x.sqlite"));
  ASSERT_TRUE(env.run);
  EXPECT_EQ(env.run->global.db, "sqlite:/tmp/x.sqlite");
  EXPECT_EQ(env.run->global.dbOrigin, "DLM_DATABASE_URL");
  ParseOutcome given =
      parse({"list", "--db", "sqlite:y"}, std::string("sqlite:x"));
  ASSERT_TRUE(given.run);
  EXPECT_EQ(given.run->global.db, "sqlite:y");
  EXPECT_EQ(given.run->global.dbOrigin, "--db");
}

// dlmctl's defaults and the library's agree: a short id given to dlmctl
// names the key a manager of that client, built without a farm, gives the
// same id taken without a level.
TEST(CommandLine, AShortIdNamesTheKeyAManagerWithTheLibrarysDefaultsUses) {
  const CommandLine c = run({"--client", "billing", "show", "nightly.import"});
  EXPECT_EQ(c.global.farm, kDefaultFarmId);
  EXPECT_FALSE(c.show.xdc);
  EXPECT_EQ(kDefaultLockLevel, LockLevel::DC);
  auto manager = DistributedLockManager::builder()
                     .clientId(c.global.client)
                     .store(openStore("sqlite::memory:"))
                     .build();
  const Lock lock = manager->getLockInstance(c.show.key);
  EXPECT_EQ(lock.key(), "DC#default#billing#nightly.import");
  EXPECT_EQ(lock.key(), lockStoreKey(c.show.xdc ? LockLevel::XDC : LockLevel::DC,
                                     {c.global.farm, c.global.client},
                                     c.show.key)
                            .key);
}

}  // namespace
}  // namespace dlm::cli
