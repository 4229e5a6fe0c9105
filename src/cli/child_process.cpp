#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "unique_fd.h"

namespace dlm::cli {

namespace {

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child: async-signal-safe calls only (the parent has
// other threads, whose locks may be held forever here).
[[noreturn]] void runChild(pid_t parent, char* const* argv, char* const* envp,
                           int errorFd) {
  // Its own group, so that signals reach everything the command starts, and
  // a terminal's Ctrl-C goes to dlmctl, which decides.
  setpgid(0, 0);
  // Dies with the parent, even by SIGKILL. If the parent died before this
  // line, the signal will never come: we are already orphaned.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv, envp);
  const int err = errno;
  // The parent learns why exec failed through the close-on-exec pipe.
  ssize_t ignored = write(errorFd, &err, sizeof err);
  (void)ignored;
  _exit(err == ENOENT ? 127 : 126);
}

int statusOf(int waitStatus) {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return 1;
}

}  // namespace

ChildProcess ChildProcess::start(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env) {
  // Orphans of the command come to us, not to init: we reap them, and
  // groupAlive() does not count their zombies for long.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  // Everything the child touches is allocated before fork.
  std::vector<char*> args = pointers(argv);
  std::vector<char*> envp = pointers(env);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe2");
  }
  UniqueFd readEnd(fds[0]);
  UniqueFd writeEnd(fds[1]);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::system_error(errno, std::generic_category(), "fork");
  if (pid == 0) runChild(parent, args.data(), envp.data(), writeEnd.get());
  // Also here, so that signalGroup() works before the child ran that far.
  setpgid(pid, pid);
  writeEnd.reset();
  int err = 0;
  ssize_t n;
  do {
    n = read(readEnd.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);

  ChildProcess child;
  child.pid_ = pid;
  if (n == static_cast<ssize_t>(sizeof err)) {
    // exec failed: the child is exiting; reap it and report as a shell does.
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    std::fprintf(stderr, "dlmctl: cannot run %s: %s\n", argv[0].c_str(),
                 std::strerror(err));
    child.pid_ = -1;
    child.ended_ = true;
    child.status_ = err == ENOENT ? 127 : 126;
  }
  return child;
}

void ChildProcess::signalGroup(int sig) const {
  if (pid_ <= 0) return;
  kill(-pid_, sig);
  // A stopped process would keep the signal pending, and dlmctl the lock.
  if (sig != SIGKILL) kill(-pid_, SIGCONT);
}

bool ChildProcess::reap() {
  for (;;) {
    int ws = 0;
    const pid_t p = waitpid(-1, &ws, WNOHANG);
    if (p > 0) {
      if (p == pid_) {
        ended_ = true;
        status_ = statusOf(ws);
      }
      continue;
    }
    if (p < 0 && errno == EINTR) continue;
    break;  // 0: others still run; ECHILD: none left
  }
  return ended_;
}

bool ChildProcess::groupAlive() const {
  return pid_ > 0 && (kill(-pid_, 0) == 0 || errno == EPERM);
}

}  // namespace dlm::cli
