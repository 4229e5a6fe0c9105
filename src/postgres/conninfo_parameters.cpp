#include "postgres/conninfo_parameters.h"

#include <cctype>
#include <optional>

namespace dlm::internal {
namespace {

bool isUri(std::string_view s) {
  return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0;
}

bool isDlmKeyword(std::string_view keyword) {
  return keyword.rfind("dlm_", 0) == 0;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// libpq's URI decoding: %XY escapes; a malformed escape is left as it is
// (libpq refuses the URI anyway when it is one of its own parameters).
std::string percentDecode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hexValue(s[i + 1]);
      const int lo = hexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::string percentEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~' ||
        c == '/' || c == ',') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

SplitConninfo splitUri(std::string_view uri) {
  SplitConninfo out;
  const std::size_t q = uri.find('?');
  if (q == std::string_view::npos) {
    out.libpq = std::string(uri);
    return out;
  }
  std::string kept;
  std::string_view query = uri.substr(q + 1);
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    const std::size_t eq = item.find('=');
    const std::string keyword = percentDecode(item.substr(0, eq));
    if (isDlmKeyword(keyword)) {
      out.dlm.emplace_back(keyword, eq == std::string_view::npos
                                        ? std::string()
                                        : percentDecode(item.substr(eq + 1)));
    } else if (!item.empty()) {
      if (!kept.empty()) kept += '&';
      kept += item;
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  out.libpq = std::string(uri.substr(0, q));
  if (!kept.empty()) out.libpq += "?" + kept;
  return out;
}

struct KeywordPair {
  std::size_t begin = 0;  // the keyword's first byte
  std::size_t end = 0;    // one past the value
  std::string keyword;
  std::string value;
};

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }

// One "keyword = value" of a keyword string from `i`, by libpq's rules
// (whitespace around '='; a value in single quotes, or up to whitespace;
// backslash escapes the next byte in both). nullopt at the end or where
// the string breaks the rules.
std::optional<KeywordPair> nextPair(std::string_view s, std::size_t& i) {
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i >= s.size()) return std::nullopt;
  KeywordPair pair;
  pair.begin = i;
  while (i < s.size() && s[i] != '=' && !isSpace(s[i])) pair.keyword += s[i++];
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i >= s.size() || s[i] != '=') return std::nullopt;
  ++i;
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i < s.size() && s[i] == '\'') {
    ++i;
    while (true) {
      if (i >= s.size()) return std::nullopt;  // unterminated quote
      if (s[i] == '\'') {
        ++i;
        break;
      }
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      pair.value += s[i++];
    }
  } else {
    while (i < s.size() && !isSpace(s[i])) {
      if (s[i] == '\\' && i + 1 < s.size()) ++i;
      pair.value += s[i++];
    }
  }
  pair.end = i;
  return pair;
}

SplitConninfo splitKeywords(std::string_view s) {
  SplitConninfo out;
  std::vector<KeywordPair> pairs;
  std::size_t i = 0;
  while (auto pair = nextPair(s, i)) pairs.push_back(std::move(*pair));
  while (i < s.size() && isSpace(s[i])) ++i;
  if (i < s.size()) {  // unreadable: libpq will say why
    out.libpq = std::string(s);
    return out;
  }
  std::size_t copied = 0;
  for (const auto& pair : pairs) {
    if (!isDlmKeyword(pair.keyword)) continue;
    out.libpq += s.substr(copied, pair.begin - copied);
    copied = pair.end;
    out.dlm.emplace_back(pair.keyword, pair.value);
  }
  out.libpq += s.substr(copied);
  return out;
}

std::string quoted(std::string_view value) {
  std::string out = "'";
  for (const char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

}  // namespace

SplitConninfo splitDlmParameters(std::string_view conninfo) {
  return isUri(conninfo) ? splitUri(conninfo) : splitKeywords(conninfo);
}

std::string withHostAndPort(std::string_view conninfo, const std::string& host,
                            const std::string& port) {
  std::string out(conninfo);
  // Later values win in both forms (libpq keeps the last one it reads), so
  // appending replaces what the string said, a URI's authority included.
  if (isUri(conninfo)) {
    char separator = out.find('?') == std::string::npos ? '?' : '&';
    if (!host.empty()) {
      out += separator + ("host=" + percentEncode(host));
      separator = '&';
    }
    if (!port.empty()) out += separator + ("port=" + percentEncode(port));
    return out;
  }
  if (!host.empty()) out += " host=" + quoted(host);
  if (!port.empty()) out += " port=" + quoted(port);
  return out;
}

}  // namespace dlm::internal
