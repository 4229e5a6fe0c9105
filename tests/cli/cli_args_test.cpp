// dlmctl's argument reader: exec's command line belongs to the command.
#include "cli/cli_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlm::cli {
namespace {

const std::vector<std::string> kExecValues = {"--lock", "--ttl", "-w", "-E"};

// What main does before any option is taken.
Args execArgs(std::vector<std::string> words) {
  Args args(std::move(words));
  args.keepCommandLineAfter("exec", kExecValues);
  return args;
}

std::vector<std::string> rest(Args& args) {
  std::vector<std::string> out;
  while (auto w = args.takePositional()) out.push_back(*w);
  return out;
}

TEST(KeepCommandLineAfter, LeavesOptionsAfterTheCommandWordToTheCommand) {
  Args args = execArgs({"exec", "--lock", "x", "echo", "--db", "oops", "-h"});
  const GlobalOptions g = takeGlobalOptions(args);
  EXPECT_NE(g.db, "oops");
  EXPECT_FALSE(g.help);
  EXPECT_EQ(args.take("--lock").value_or(""), "x");
  EXPECT_EQ(rest(args),
            (std::vector<std::string>{"exec", "echo", "--db", "oops", "-h"}));
}

TEST(KeepCommandLineAfter, TakesGlobalAndExecOptionsBeforeTheCommandWord) {
  Args args = execArgs({"--db", "a.sqlite", "exec", "-w", "0.5", "--db=b",
                        "--lock", "x", "--", "ls", "--", "--ttl", "3"});
  const GlobalOptions g = takeGlobalOptions(args);
  EXPECT_EQ(g.db, "b");  // the last one wins
  EXPECT_EQ(args.take("-w").value_or(""), "0.5");
  EXPECT_EQ(args.take("--lock").value_or(""), "x");
  EXPECT_FALSE(args.take("--ttl"));
  EXPECT_EQ(rest(args),
            (std::vector<std::string>{"exec", "ls", "--", "--ttl", "3"}));
}

TEST(KeepCommandLineAfter, ChangesNothingForOtherCommands) {
  Args args = execArgs({"release", "KEY", "--xdc"});
  EXPECT_TRUE(args.takeFlag("--xdc"));
  EXPECT_EQ(rest(args), (std::vector<std::string>{"release", "KEY"}));
}

TEST(KeepCommandLineAfter, LeavesAnExecWithoutCommandToTheUsageCheck) {
  Args args = execArgs({"exec", "--lock", "x", "-n"});
  EXPECT_TRUE(args.takeFlag("-n"));
  EXPECT_EQ(args.take("--lock").value_or(""), "x");
  EXPECT_EQ(rest(args), (std::vector<std::string>{"exec"}));
}

}  // namespace
}  // namespace dlm::cli
