// dlmctl exec: runs a command while holding a lock, renewing the lease while
// the command runs.
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "dlm/lock_guard.h"

extern char** environ;

namespace dlm::cli {
namespace {

// Exit status when the lock is held elsewhere and the command did not run
// (EX_TEMPFAIL of sysexits.h: "try again later").
constexpr int kLockUnavailable = 75;

std::vector<std::string> childEnvironment(const Lock& lock) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "DLM_FENCING_TOKEN=", 18) != 0 &&
        std::strncmp(*e, "DLM_LOCK_KEY=", 13) != 0) {
      env.emplace_back(*e);
    }
  }
  env.push_back(fmt::format("DLM_FENCING_TOKEN={}", lock.fencingToken()));
  env.push_back("DLM_LOCK_KEY=" + lock.storeKey());
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exitStatusOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int runExec(const GlobalOptions& global, Args& args) {
  const auto id = args.take("--lock");
  if (!id) throw UsageError("exec needs --lock ID");
  const bool xdc = args.takeFlag("--xdc");
  LockConfiguration config;
  config.lockTtl = std::chrono::seconds(
      parseInteger("--ttl", args.take("--ttl").value_or("60"), 1, 86400));
  config.waitForLock = std::chrono::seconds(
      parseInteger("--wait", args.take("--wait").value_or("0"), 0, 86400));
  std::vector<std::string> command;
  while (auto word = args.takePositional()) command.push_back(*word);
  if (command.empty()) throw UsageError("exec needs a command after --");
  args.requireEmpty();

  auto manager = openManager(global, openCliStore(global),
                             /*applyMigrations=*/false, config);
  Lock lock =
      manager->getLockInstance(*id, xdc ? LockLevel::XDC : LockLevel::DC);
  try {
    manager->acquireLock(lock);
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::LOCK_UNAVAILABLE) throw;
    std::fprintf(stderr, "dlmctl: %s; not running the command\n", e.what());
    return kLockUnavailable;
  }

  std::atomic<pid_t> child{0};
  std::atomic<bool> lost{false};
  LockGuard guard(*manager, std::move(lock),
                  KeepAliveOptions{true, [&](const DLMException&) {
                                     // The command must not go on without
                                     // the lock.
                                     lost = true;
                                     if (pid_t pid = child.load(); pid > 0) {
                                       kill(pid, SIGTERM);
                                     }
                                   }});
  std::vector<std::string> env = childEnvironment(guard.lock());
  std::vector<char*> argv = pointers(command);
  std::vector<char*> envp = pointers(env);
  pid_t pid = 0;
  const int rc =
      posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data());
  if (rc != 0) {
    std::fprintf(stderr, "dlmctl: cannot run %s: %s\n", argv[0],
                 std::strerror(rc));
    return 127;
  }
  child = pid;
  if (lost) kill(pid, SIGTERM);  // lost before the pid was published
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (lost) {
    std::fprintf(stderr,
                 "dlmctl: the lock '%s' was lost while the command ran; the "
                 "command was stopped\n",
                 guard.lock().lockId().c_str());
    return 1;
  }
  const bool released = guard.release();
  if (!released) {
    std::fprintf(stderr, "dlmctl: the lock was taken over before release\n");
    return 1;
  }
  return exitStatusOf(status);
}

}  // namespace dlm::cli
