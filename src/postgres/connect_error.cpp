#include "postgres/connect_error.h"

#include <cctype>
#include <vector>

namespace dlm::internal {
namespace {

bool isStateChar(char c) {
  return std::isdigit(static_cast<unsigned char>(c)) ||
         (c >= 'A' && c <= 'Z');
}

// A verbose line of the server's location: "LOCATION:  auth_failed,
// auth.c:334" (the label is translated, the rest is not).
bool isLocationLine(std::string_view line) {
  const std::size_t comma = line.rfind(", ");
  const std::size_t colon = line.rfind(':');
  if (comma == std::string_view::npos || colon == std::string_view::npos ||
      colon < comma || colon + 1 >= line.size()) {
    return false;
  }
  for (std::size_t i = colon + 1; i < line.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(line[i]))) return false;
  }
  const std::string_view file = line.substr(comma + 2, colon - comma - 2);
  return file.size() > 2 && file.substr(file.size() - 2) == ".c" &&
         file.find(' ') == std::string_view::npos;
}

}  // namespace

ConnectError parseConnectError(std::string_view verbose) {
  ConnectError out;
  std::size_t start = 0;
  while (start < verbose.size()) {
    std::size_t end = verbose.find('\n', start);
    if (end == std::string_view::npos) end = verbose.size();
    std::string_view line = verbose.substr(start, end - start);
    start = end + 1;
    if (isLocationLine(line)) continue;
    // "<severity>:  <SQLSTATE>: <message>": libpq's verbose layout.
    std::string kept(line);
    const std::size_t at = kept.find(":  ");
    if (at != std::string::npos && at + 10 <= kept.size() &&
        kept.compare(at + 8, 2, ": ") == 0) {
      bool state = true;
      for (std::size_t i = at + 3; i < at + 8; ++i) {
        state = state && isStateChar(kept[i]);
      }
      if (state) {
        out.sqlstate = kept.substr(at + 3, 5);
        kept.erase(at + 3, 7);
      }
    }
    if (kept.find("no password supplied") != std::string::npos) {
      // libpq's own check (fe_sendauth): the server asked for a password,
      // and the connection has none to send.
      out.sqlstate = std::string(kInvalidPasswordState);
    }
    if (!out.message.empty()) out.message += '\n';
    out.message += kept;
  }
  return out;
}

bool isAuthenticationFailure(std::string_view sqlstate) {
  return sqlstate.size() == 5 && sqlstate.substr(0, 2) == "28";
}

}  // namespace dlm::internal
