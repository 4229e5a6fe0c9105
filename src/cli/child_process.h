// The command dlmctl exec runs: started in a process group of its own, tied
// to dlmctl's life, signalled as a group and reaped.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dlm::cli {

class ChildProcess {
 public:
  // Starts `argv` (searched in PATH) with environment `env` as the leader of
  // a new process group. The child gets SIGKILL when the thread that called
  // start() ends (PR_SET_PDEATHSIG), so call it from the main thread: dlmctl
  // dying even by SIGKILL ends the command. The caller's signal mask is not
  // inherited. Makes dlmctl a child subreaper, so that processes the
  // command leaves behind are dlmctl's to reap.
  // Returns a child that did not start (started() false) with the exit
  // status a shell would give (127 not found, 126 not executable) and a
  // message on stderr when exec fails.
  static ChildProcess start(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env);

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Sends `sig` to the command's process group (the command and whatever it
  // started that stayed in the group), then SIGCONT, so that a stopped
  // process (Ctrl-Z, or SIGTTIN for reading the terminal from outside the
  // foreground group) acts on it. No-op once the group is empty.
  void signalGroup(int sig) const;
  // Reaps every ended child without waiting; true once the command itself
  // has ended (its status in exitStatus()).
  bool reap();
  bool ended() const { return ended_; }
  // True while a process of the command's group still runs (the command or
  // something it left behind).
  bool groupAlive() const;
  // The command's exit status as a shell reports it: its code, or 128+N when
  // signal N ended it. Meaningful once ended() (or when not started()).
  int exitStatus() const { return status_; }

 private:
  pid_t pid_ = -1;
  bool ended_ = false;
  int status_ = 0;
};

}  // namespace dlm::cli
