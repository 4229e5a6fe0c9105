// The terminal of dlmctl top's live view: the alternate screen with the
// cursor hidden, keys read one at a time without echo, all restored when
// the Terminal goes (also when a frame throws).
#pragma once

#include <termios.h>

#include <string>

namespace dlm::cli {

class Terminal {
 public:
  // Switches stdout (a terminal: isatty) to the alternate screen and hides
  // the cursor; when stdin is a terminal too and this process is in its
  // foreground, turns off its line buffering and echo (signals from Ctrl-C
  // stay on). Throws std::system_error when
  // the terminal cannot be set.
  Terminal();
  // Restores stdin's settings, the cursor and the normal screen.
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // stdin's descriptor for poll() when keys are read, else -1.
  int keysFd() const { return keys_ ? 0 : -1; }
  // Reads the keys pressed so far (never blocks): whether one of them was
  // q or Q.
  bool quitPressed();

  // Replaces the screen with `frame`: lines cut to the terminal's width,
  // as many as fit its height (the last one saying how many were left
  // out), each clearing the rest of its row.
  void draw(const std::string& frame);

 private:
  bool keys_ = false;
  termios saved_{};
};

}  // namespace dlm::cli
