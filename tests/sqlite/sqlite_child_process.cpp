#include "sqlite_child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dlm::sqlite_test {

const char* holderProgram() { return DLM_SQLITE_HOLDER; }

ChildProcess::ChildProcess(const std::string& program,
                           const std::vector<std::string>& args,
                           Stdin stdinMode) {
  int fds[2];
  // CLOEXEC on both ends: only the dup2'd copy reaches the child, so its
  // stdout closes (EOF here) exactly when it exits.
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  }
  // The child's stdin: a socket rather than a pipe, so that writeLine can
  // send with MSG_NOSIGNAL (a write to a pipe whose child died would kill
  // this process with SIGPIPE). CLOEXEC as above: the child's copy is the
  // dup2'd one, so it reads EOF when we close ours.
  int in[2] = {-1, -1};
  if (stdinMode == Stdin::PIPE &&
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    const int error = errno;
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("socketpair: ") +
                             std::strerror(error));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (in[1] >= 0) {
    posix_spawn_file_actions_adddup2(&actions, in[1], STDIN_FILENO);
  }
  std::vector<std::string> all{program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = posix_spawn(&pid_, program.c_str(), &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (in[1] >= 0) close(in[1]);
  if (rc != 0) {
    close(fds[0]);
    if (in[0] >= 0) close(in[0]);
    throw std::runtime_error("posix_spawn " + program + ": " +
                             std::strerror(rc));
  }
  stdout_ = fds[0];
  stdin_ = in[0];
}

ChildProcess::~ChildProcess() {
  if (!reaped_) killAndWait(SIGKILL);
  if (stdout_ >= 0) close(stdout_);
  if (stdin_ >= 0) close(stdin_);
}

bool ChildProcess::writeLine(const std::string& line) {
  if (stdin_ < 0) return false;
  const std::string data = line + "\n";
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        send(stdin_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

bool ChildProcess::stop(std::chrono::milliseconds timeout) {
  if (reaped_) return false;
  kill(pid_, SIGSTOP);
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    // WUNTRACED: report the stop; WNOHANG: keep our own deadline.
    const pid_t r = waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == pid_) {
      if (WIFSTOPPED(status)) return true;
      reaped_ = true;  // it exited instead
      status_ = status;
      return false;
    }
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void ChildProcess::resume() {
  if (!reaped_) kill(pid_, SIGCONT);
}

std::optional<std::string> ChildProcess::readLine(
    std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) return std::nullopt;
    pollfd p{stdout_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[256];
    const ssize_t n = read(stdout_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // EOF: the child is gone
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

int ChildProcess::killAndWait(int signal) {
  if (!reaped_) kill(pid_, signal);
  return wait();
}

int ChildProcess::wait() {
  if (reaped_) return status_;
  // EINTR: keep waiting.
  while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status_;
}

}  // namespace dlm::sqlite_test
