#include "common/redact.h"

#include <regex>
#include <string>

namespace dlm::internal {

std::string redactSecrets(std::string_view text) {
  // password=value, password = 'quoted \' value', ?password=value&...
  static const std::regex kKeyword(
      R"((password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*))", std::regex::icase);
  // scheme://user:secret@host (the secret may hold ':' but not '@' or
  // whitespace; libpq wants '@' percent-encoded there). Any scheme, and any
  // number of slashes: a refused URL ("mysql://", "postgresql:/") is quoted
  // back to the user too.
  static const std::regex kUri(R"(([a-z][a-z0-9+.-]*:/*[^:/@\s]*:)[^@\s]*@)",
                               std::regex::icase);
  std::string out = std::regex_replace(std::string(text), kKeyword, "$1***");
  return std::regex_replace(out, kUri, "$1***@");
}

}  // namespace dlm::internal
