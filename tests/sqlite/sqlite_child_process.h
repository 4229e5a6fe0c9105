// A helper process for the SQLite tests that need a second process on the
// file (tests/sqlite/sqlite_holder_process.cpp) and for the paused-holder
// tests (tests/faults/paused_holder.cpp): started with posix_spawn, it
// reports on its stdout when it holds what it was told to hold; the test
// reads that line, then lets it run, stops and resumes it, kills it, or
// waits for it. With Stdin::PIPE the test can also send it lines.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlm::sqlite_test {

class ChildProcess {
 public:
  // INHERIT: the child reads this process's stdin; PIPE: a socket of ours
  // that writeLine sends to.
  enum class Stdin { INHERIT, PIPE };

  // Starts `program` with `args` (argv[1]...), its stdout on a pipe to us.
  // Throws std::runtime_error when it cannot be started.
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               Stdin stdinMode = Stdin::INHERIT);
  // SIGKILLs the child if it still runs, and reaps it: a failed test never
  // leaves a process holding the file.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line the child writes (without the newline), or nullopt when
  // `timeout` passes first or the child closed its stdout (exited).
  std::optional<std::string> readLine(std::chrono::milliseconds timeout);

  // Sends `line` and a newline to the child's stdin (Stdin::PIPE). False
  // when it cannot (no pipe, or the child is gone); never raises SIGPIPE.
  bool writeLine(const std::string& line);

  // Sends SIGSTOP and waits until the child is stopped, at most `timeout`.
  // True once it is stopped; false if it exited (then reaped) or did not
  // stop in time.
  bool stop(std::chrono::milliseconds timeout);
  // Sends SIGCONT (to a stopped child: it runs on from where it stopped).
  void resume();

  // Sends `signal` and reaps the child; returns its wait status.
  int killAndWait(int signal);
  // Waits for the child to exit; returns its wait status.
  int wait();

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  int stdin_ = -1;  // our end of the child's stdin (Stdin::PIPE)
  bool reaped_ = false;
  int status_ = 0;
  std::string buffer_;
};

// A path of the helper executable, set by CMake (DLM_SQLITE_HOLDER).
const char* holderProgram();

}  // namespace dlm::sqlite_test
