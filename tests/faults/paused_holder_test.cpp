// Proof under a real pause (issue 24): a holder process takes a lock with a
// TTL of 1 s and no renewal and is stopped with SIGSTOP, just before its
// write, for a random pause around the TTL (its write command is already
// queued on its stdin: it writes the moment it runs again, as a thread
// paused there would). Meanwhile this process, the
// second writer, takes the lock as soon as it can and writes its row for the
// round. Then the holder is resumed with SIGCONT and makes its write: in the
// guarded loop guardWithin(lock, tx) first, in the unguarded loop the same
// write without it. A round the second writer took over must end with its
// row alone: the holder's row beside it is a lost update. With the guard
// there must be none; without it there must be some, or the test could not
// fail. Both loops run side by side on their own keys with the same pause
// each round, on the real PostgreSQL server of the PG* variables and on a
// real SQLite file.
//
// Every round is bounded: a holder that does not answer within kAnswerWithin
// fails the test and is killed (ChildProcess's destructor). The pauses are
// printed with the seed; DLM_TEST_SEED=<seed> repeats a run's pauses.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dlm/dlm.h"
#include "sqlite_child_process.h"
#include "support/test_stores.h"

namespace dlm::test {
namespace {

using sqlite_test::ChildProcess;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// The holder's lease: 1 s, never renewed.
constexpr milliseconds kTtl{1000};
// Pauses are drawn from [kShortestPause, kLongestPause): about half the
// rounds end before the TTL, half after it.
constexpr milliseconds kShortestPause{500};
constexpr milliseconds kLongestPause{1600};
constexpr int kRounds = 12;
// How long a holder may take to answer a command (its start included).
constexpr milliseconds kAnswerWithin{10000};
// How long a holder may take to stop after SIGSTOP.
constexpr milliseconds kStopWithin{2000};
// The second writer's attempts while the holder is stopped.
constexpr milliseconds kTryEvery{10};
// The second writer keeps the lock well past the round.
constexpr milliseconds kSecondTtl{30000};

// The holder's clientId (dlm_paused_holder's kClient): the same key.
const std::string kClient = "pause-proof";

std::uint32_t seedOfRun() {
  if (const char* seed = std::getenv("DLM_TEST_SEED")) {
    return static_cast<std::uint32_t>(std::stoul(seed));
  }
  return std::random_device{}();
}

// One pause drawn uniformly from each of kRounds equal slices of
// [kShortestPause, kLongestPause), in random order: lengths spread around
// the TTL, with several rounds past it in every run.
std::vector<milliseconds> pausesOfRun(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const double slice =
      static_cast<double>((kLongestPause - kShortestPause).count()) / kRounds;
  std::uniform_real_distribution<double> within(0, slice);
  std::vector<milliseconds> pauses;
  for (int r = 0; r < kRounds; ++r) {
    pauses.emplace_back(kShortestPause.count() +
                        static_cast<long>(r * slice + within(rng)));
  }
  std::shuffle(pauses.begin(), pauses.end(), rng);
  return pauses;
}

struct Round {
  milliseconds pause{0};
  bool takenOver = false;     // the second writer got the lock and wrote
  std::string holderWrite;    // the holder's answer to its write
  std::string holderRelease;  // ... and to its release afterwards
};

// One loop: a holder process and this process's handle on the same key.
struct Loop {
  bool guarded = false;
  std::string id;
  std::unique_ptr<ChildProcess> holder;
  std::optional<Lock> second;
  std::vector<Round> rounds;

  std::string name() const { return guarded ? "guarded" : "unguarded"; }
  std::string marker(int round, const std::string& writer) const {
    return fmt::format("{}#{}#{}", name(), round, writer);
  }
};

milliseconds left(steady_clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(
                                       deadline - steady_clock::now()));
}

// Sends `command` to the loop's holder and returns its answer, or "(no
// answer)" when none came before `deadline`.
std::string ask(Loop& loop, const std::string& command,
                steady_clock::time_point deadline) {
  if (!loop.holder->writeLine(command)) return "(holder gone)";
  return loop.holder->readLine(left(deadline)).value_or("(no answer)");
}

class PausedHolder : public ::testing::TestWithParam<std::string> {};

TEST_P(PausedHolder, AGuardedWriteIsNeverLostAndAnUnguardedOneIs) {
  const std::uint32_t seed = seedOfRun();
  const std::vector<milliseconds> pauses = pausesOfRun(seed);
  SCOPED_TRACE(fmt::format("DLM_TEST_SEED={}", seed));
  std::printf("[ pause ] %s: seed %u, TTL %lld ms, %d rounds\n",
              GetParam().c_str(), seed, static_cast<long long>(kTtl.count()),
              kRounds);

  auto env = makeEnvironment(GetParam());
  env->beginAppTransaction()->rollback();  // creates the application's table
  const std::string table =
      env->postgresSchema().empty()
          ? "app_work"
          : fmt::format("\"{}\".app_work", env->postgresSchema());
  auto manager = DistributedLockManager::builder()
                     .clientId(kClient)
                     .store(env->newStore())
                     .build();
  manager->initialize();

  std::vector<Loop> loops(2);
  for (std::size_t i = 0; i < loops.size(); ++i) {
    Loop& loop = loops[i];
    loop.guarded = i == 0;
    loop.id = "paused." + loop.name();
    loop.second.emplace(manager->getLockInstance(loop.id, LockLevel::XDC));
    std::vector<std::string> args{
        "--url", env->url(), "--table",  table,
        "--id",  loop.id,    "--ttl-ms", std::to_string(kTtl.count())};
    if (!env->postgresSchema().empty()) {
      args.insert(args.end(), {"--schema", env->postgresSchema()});
    }
    if (loop.guarded) args.push_back("--guarded");
    loop.holder = std::make_unique<ChildProcess>(DLM_PAUSED_HOLDER, args,
                                                 ChildProcess::Stdin::PIPE);
    ASSERT_EQ(loop.holder->readLine(kAnswerWithin).value_or("(no answer)"),
              "ready")
        << loop.name() << " holder";
  }

  for (int r = 0; r < kRounds; ++r) {
    const milliseconds pause = pauses[static_cast<std::size_t>(r)];
    const auto deadline = steady_clock::now() + pause + kAnswerWithin;
    for (Loop& loop : loops) {
      const std::string held = ask(loop, "acquire", deadline);
      ASSERT_EQ(held.rfind("held ", 0), 0u)
          << loop.name() << " round " << r << ": " << held;
    }
    // Both stopped between acquiring and writing; the write they will make
    // when they run again is queued on their stdin.
    for (Loop& loop : loops) {
      ASSERT_TRUE(loop.holder->stop(kStopWithin))
          << loop.name() << " round " << r << ": the holder did not stop";
      ASSERT_TRUE(loop.holder->writeLine("write " + loop.marker(r, "holder")));
    }
    const auto resumeAt = steady_clock::now() + pause;
    std::vector<Round> now(loops.size());
    // The second writer, while the holders are stopped: takes each lock as
    // soon as its lease ends, and writes its row in its own transaction
    // (guarded too in the guarded loop).
    for (;;) {
      bool waiting = false;
      for (std::size_t i = 0; i < loops.size(); ++i) {
        if (now[i].takenOver) continue;
        Loop& loop = loops[i];
        try {
          manager->tryAcquireLock(*loop.second, kSecondTtl);
        } catch (const DLMException& e) {
          ASSERT_EQ(e.code(), ErrorCode::LOCK_UNAVAILABLE) << e.what();
          waiting = true;
          continue;
        }
        auto app = env->beginAppTransaction();
        if (loop.guarded) manager->guardWithin(*loop.second, app->adapter());
        app->write(loop.marker(r, "second"));
        app->commit();
        now[i].takenOver = true;
      }
      if (!waiting || steady_clock::now() + kTryEvery >= resumeAt) break;
      std::this_thread::sleep_for(kTryEvery);
    }
    std::this_thread::sleep_until(resumeAt);
    for (Loop& loop : loops) loop.holder->resume();
    for (std::size_t i = 0; i < loops.size(); ++i) {
      Loop& loop = loops[i];
      now[i].pause = pause;
      now[i].holderWrite =
          loop.holder->readLine(left(deadline)).value_or("(no answer)");
      now[i].holderRelease = ask(loop, "release", deadline);
      if (now[i].takenOver) {
        EXPECT_TRUE(manager->releaseLock(*loop.second));
      }
      loop.rounds.push_back(now[i]);
    }
    std::printf(
        "[ pause ] round %2d: pause %4lld ms; guarded: %s, holder %s; "
        "unguarded: %s, holder %s\n",
        r + 1, static_cast<long long>(pause.count()),
        now[0].takenOver ? "taken over" : "not taken",
        now[0].holderWrite.c_str(),
        now[1].takenOver ? "taken over" : "not taken",
        now[1].holderWrite.c_str());
  }

  // What the application's table says.
  int lost[2] = {0, 0};
  int takenOver[2] = {0, 0};
  int guardedCommits = 0;
  for (std::size_t i = 0; i < loops.size(); ++i) {
    const Loop& loop = loops[i];
    for (int r = 0; r < kRounds; ++r) {
      const Round& round = loop.rounds[static_cast<std::size_t>(r)];
      SCOPED_TRACE(fmt::format("{} round {} (pause {} ms)", loop.name(), r + 1,
                               round.pause.count()));
      const bool holderRow = env->appRowExists(loop.marker(r, "holder"));
      const bool secondRow = env->appRowExists(loop.marker(r, "second"));
      EXPECT_EQ(secondRow, round.takenOver);
      EXPECT_EQ(holderRow, round.holderWrite == "wrote")
          << "the holder answered " << round.holderWrite;
      if (round.takenOver) {
        ++takenOver[i];
        if (holderRow) ++lost[i];
        // Taken over: the holder's release finds nothing of its own.
        EXPECT_EQ(round.holderRelease, "released 0");
      } else {
        EXPECT_EQ(round.holderRelease, "released 1");
      }
      if (loop.guarded) {
        if (round.takenOver) {
          EXPECT_EQ(round.holderWrite, "refused LOCK_NOT_HELD");
        } else {
          // Refused only when the lease ended before the guard ran (a pause
          // at the TTL that the second writer's last attempt just missed).
          EXPECT_TRUE(round.holderWrite == "wrote" ||
                      round.holderWrite == "refused LOCK_NOT_HELD")
              << round.holderWrite;
          if (round.holderWrite == "wrote") ++guardedCommits;
        }
      } else {
        EXPECT_EQ(round.holderWrite, "wrote");
      }
    }
  }
  std::printf(
      "[ pause ] %s: guarded: taken over in %d of %d rounds, %d lost "
      "updates, %d guarded writes committed; unguarded: taken over in %d, "
      "%d lost updates\n",
      GetParam().c_str(), takenOver[0], kRounds, lost[0], guardedCommits,
      takenOver[1], lost[1]);
  EXPECT_GE(takenOver[0], 1) << "no guarded round was taken over: the run "
                                "proves nothing about the guard";
  EXPECT_EQ(lost[0], 0) << "a paused holder's guarded write was committed "
                           "after its lock was taken over";
  EXPECT_GE(guardedCommits, 1) << "the guard refused every write";
  EXPECT_GE(lost[1], 1) << "no lost update without the guard: this test "
                           "could not tell a guard from none";
  // The holders are killed with their ChildProcess.
  manager->destroy();
}

INSTANTIATE_TEST_SUITE_P(Stores, PausedHolder,
                         ::testing::ValuesIn(compiledStores()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace dlm::test
