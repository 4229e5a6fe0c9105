// Reading a libpq connection string's text without quoting its secrets:
// what ConnParams::parse checks before libpq reads a string, and how it
// words libpq's refusal.
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// Non-empty and only the digits 0-9 (a port number's text).
bool isDigits(std::string_view text);

// A postgresql:// (or postgres://) URI whose user name or password holds a
// '/', '?' or '@' that is not percent-encoded: libpq would read the rest of
// the password as the hosts, port or path, and quote it back in its
// errors. A database name with an '@' counts too (it must be encoded).
bool uriUserInfoSpills(std::string_view conninfo);

// libpq's parse error for `conninfo` with every quoted part masked ("***")
// but keyword-like names that stand in the string as keywords (a misspelt
// keyword is named, its value is not) and single characters (missing "="):
// libpq quotes values, bare words and percent-encoded parts of a URI's
// password alike.
std::string maskQuotedValues(const std::string& libpqError,
                             std::string_view conninfo);

}  // namespace dlm::internal
