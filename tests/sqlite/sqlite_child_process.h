// A helper process for the SQLite tests that need a second process on the
// file (tests/sqlite/sqlite_holder_process.cpp): started with posix_spawn, it
// reports on its stdout when it holds what it was told to hold; the test
// reads that line, then lets it run, kills it, or waits for it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlm::sqlite_test {

class ChildProcess {
 public:
  // Starts `program` with `args` (argv[1]...), its stdout on a pipe to us.
  // Throws std::runtime_error when it cannot be started.
  ChildProcess(const std::string& program,
               const std::vector<std::string>& args);
  // SIGKILLs the child if it still runs, and reaps it: a failed test never
  // leaves a process holding the file.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line the child writes (without the newline), or nullopt when
  // `timeout` passes first or the child closed its stdout (exited).
  std::optional<std::string> readLine(std::chrono::milliseconds timeout);

  // Sends `signal` and reaps the child; returns its wait status.
  int killAndWait(int signal);
  // Waits for the child to exit; returns its wait status.
  int wait();

 private:
  pid_t pid_ = -1;
  int stdout_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string buffer_;
};

// A path of the helper executable, set by CMake (DLM_SQLITE_HOLDER).
const char* holderProgram();

}  // namespace dlm::sqlite_test
