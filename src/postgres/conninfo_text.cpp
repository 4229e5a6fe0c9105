#include "postgres/conninfo_text.h"

#include <algorithm>
#include <cctype>

namespace dlm::internal {
namespace {

// Whether `word` looks like a keyword and stands in `conninfo` as one
// (`word=` at the start, after a space, '?' or '&'): a name, not a secret.
bool isKeywordIn(std::string_view conninfo, std::string_view word) {
  // libpq's keywords are lower-case letters and '_'.
  if (word.empty() || word.size() > 40 ||
      !std::all_of(word.begin(), word.end(),
                   [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; })) {
    return false;
  }
  const std::string key = std::string(word) + "=";
  for (std::size_t at = conninfo.find(key); at != std::string_view::npos;
       at = conninfo.find(key, at + 1)) {
    if (at == 0 || conninfo[at - 1] == ' ' || conninfo[at - 1] == '\t' ||
        conninfo[at - 1] == '?' || conninfo[at - 1] == '&') {
      return true;
    }
  }
  return false;
}

}  // namespace

bool isDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
}

bool uriUserInfoSpills(std::string_view s) {
  std::string_view rest;
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (s.size() >= scheme.size() &&
        std::equal(scheme.begin(), scheme.end(), s.begin(),
                   [](char a, char b) {
                     return std::tolower(static_cast<unsigned char>(a)) == b;
                   })) {
      rest = s.substr(scheme.size());
    }
  }
  if (rest.empty()) return false;
  // libpq takes user:password up to the first '@' before any '/', then the
  // hosts up to the next '/' or '?'.
  const std::size_t slash = rest.find('/');
  const std::size_t at = rest.find('@');
  if (at != std::string_view::npos &&
      (slash == std::string_view::npos || at < slash)) {
    // A second '@' in the hosts or the path: the password held one (and
    // perhaps a '/'); a database name with an '@' must encode it too.
    const std::string_view after = rest.substr(at + 1);
    return after.substr(0, after.find('?')).find('@') !=
           std::string_view::npos;
  }
  if (at == std::string_view::npos) return false;
  // No user-info, but an '@' later: the password held a '/' (or a '?'),
  // and "user:pass..." now reads as a host with a port that is not a
  // number, or the '@' sits in the path.
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?"));
  if (authority.find('[') == std::string_view::npos) {
    std::size_t from = 0;
    while (from <= authority.size()) {
      std::size_t comma = authority.find(',', from);
      if (comma == std::string_view::npos) comma = authority.size();
      const std::string_view hostPort = authority.substr(from, comma - from);
      const std::size_t colon = hostPort.find(':');
      if (colon != std::string_view::npos &&
          !isDigits(hostPort.substr(colon + 1))) {
        return true;
      }
      from = comma + 1;
    }
  }
  return rest.substr(0, rest.find('?')).find('@') != std::string_view::npos;
}

std::string maskQuotedValues(const std::string& raw,
                             std::string_view conninfo) {
  std::string why;
  std::size_t from = 0;
  for (;;) {
    const std::size_t open = raw.find('"', from);
    const std::size_t close =
        open == std::string::npos ? open : raw.find('"', open + 1);
    if (close == std::string::npos) break;
    const std::string_view word(raw.data() + open + 1, close - open - 1);
    why.append(raw, from, open + 1 - from);
    why += word.size() <= 1 || isKeywordIn(conninfo, word) ? std::string(word)
                                                           : "***";
    why += '"';
    from = close + 1;
  }
  why.append(raw, from, std::string::npos);
  return why;
}

}  // namespace dlm::internal
