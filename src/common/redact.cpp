#include "common/redact.h"

#include <cctype>
#include <string>

namespace dlm::internal {
namespace {

// A hand-written scan, not std::regex: libstdc++'s regex backtracks
// recursively, so a message quoting a long key (8 KB of letters) took
// seconds and could exhaust the stack.

bool isSpace(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}
bool isAlpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}
bool isSchemeChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' ||
         c == '.' || c == '-';
}

bool keywordAt(std::string_view text, std::size_t at) {
  static constexpr std::string_view kKeyword = "password";
  if (text.size() - at < kKeyword.size()) return false;
  for (std::size_t i = 0; i < kKeyword.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[at + i])) != kKeyword[i]) {
      return false;
    }
  }
  return true;
}

// password=value, password = 'quoted \' value', ?password=value&...: the
// value becomes ***.
std::string maskKeywords(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    if (!keywordAt(text, i)) {
      out += text[i++];
      continue;
    }
    std::size_t j = i + 8;
    while (j < text.size() && isSpace(text[j])) ++j;
    if (j == text.size() || text[j] != '=') {
      out += text[i++];
      continue;
    }
    ++j;
    while (j < text.size() && isSpace(text[j])) ++j;
    out.append(text.substr(i, j - i));
    out += "***";
    if (j < text.size() && text[j] == '\'') {
      // A quoted value, with \-escapes, up to its closing quote (or the end).
      for (++j; j < text.size() && text[j] != '\''; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
      }
      if (j < text.size()) ++j;
    } else {
      while (j < text.size() && !isSpace(text[j]) && text[j] != '&') ++j;
    }
    i = j;
  }
  return out;
}

// scheme://user:secret@host (the secret may hold ':' but not '@' or
// whitespace; libpq wants '@' percent-encoded there). Any scheme, and any
// number of slashes: a refused URL ("mysql://", "postgresql:/") is quoted
// back to the user too. The secret becomes ***.
std::string maskUserInfo(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  std::size_t copied = 0;
  std::size_t schemeStart = std::string::npos;  // of the current run
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != ':') {
      if (!isSchemeChar(c)) {
        schemeStart = std::string::npos;
      } else if (schemeStart == std::string::npos && isAlpha(c)) {
        schemeStart = i;
      }
      continue;
    }
    if (schemeStart == std::string::npos || schemeStart < copied) continue;
    schemeStart = std::string::npos;
    // ':' ends a scheme: slashes, a user, ':', the secret, '@'.
    std::size_t j = i + 1;
    while (j < text.size() && text[j] == '/') ++j;
    while (j < text.size() && text[j] != ':' && text[j] != '/' &&
           text[j] != '@' && !isSpace(text[j])) {
      ++j;
    }
    if (j == text.size() || text[j] != ':') continue;
    const std::size_t secret = j + 1;
    std::size_t end = secret;
    while (end < text.size() && text[end] != '@' && !isSpace(text[end])) ++end;
    if (end == text.size() || text[end] != '@') continue;
    out.append(text, copied, secret - copied);
    out += "***@";
    copied = end + 1;
    i = end;
  }
  out.append(text, copied, std::string::npos);
  return out;
}

}  // namespace

std::string redactSecrets(std::string_view text) {
  return maskUserInfo(maskKeywords(text));
}

}  // namespace dlm::internal
