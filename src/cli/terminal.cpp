#include "terminal.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <system_error>
#include <vector>

namespace dlm::cli {
namespace {

constexpr const char* kEnter = "\x1b[?1049h\x1b[?25l";  // alternate screen
constexpr const char* kLeave = "\x1b[?25h\x1b[?1049l";

void put(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// `line` cut to at most `width` bytes, never inside a UTF-8 sequence.
std::string clip(const std::string& line, std::size_t width) {
  if (width == 0 || line.size() <= width) return line;
  std::size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) {
    --end;
  }
  return line.substr(0, end);
}

}  // namespace

Terminal::Terminal() {
  // Only in the foreground: a background job changing the terminal's
  // settings would be stopped (SIGTTOU).
  if (::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp()) {
    if (::tcgetattr(STDIN_FILENO, &saved_) != 0) {
      throw std::system_error(errno, std::generic_category(), "tcgetattr");
    }
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (::tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) {
      throw std::system_error(errno, std::generic_category(), "tcsetattr");
    }
    keys_ = true;
  }
  put(kEnter);
}

Terminal::~Terminal() {
  put(kLeave);
  // Best effort: nothing better to do in a destructor when it fails.
  if (keys_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

bool Terminal::quitPressed() {
  if (!keys_) return false;
  char buf[64];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    // With VMIN 0, 0 bytes means nothing more is pending.
    if (n <= 0) return false;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 'q' || buf[i] == 'Q') return true;
    }
  }
}

void Terminal::draw(const std::string& frame) {
  winsize size{};
  const bool known = ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0;
  const std::size_t width = known ? size.ws_col : 0;
  const std::size_t height = known ? size.ws_row : 0;

  std::vector<std::string> lines;
  for (std::size_t at = 0; at < frame.size();) {
    const std::size_t end = std::min(frame.find('\n', at), frame.size());
    lines.push_back(frame.substr(at, end - at));
    at = end + 1;
  }
  if (height > 0 && lines.size() > height) {
    const std::size_t left = lines.size() - (height - 1);
    lines.resize(height - 1);
    lines.push_back(
        fmt::format("... {} more line{} (a taller window, or "
                    "--prefix, shows them)",
                    left, left == 1 ? "" : "s"));
  }
  std::string out = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out += clip(lines[i], width) + "\x1b[K";
    // No newline after the last row: it would scroll the screen.
    if (i + 1 < lines.size()) out += "\r\n";
  }
  out += "\x1b[J";
  put(out);
}

}  // namespace dlm::cli
