// dlm's own parameters inside a PostgreSQL connection string (dlm_*), taken
// out before libpq sees it, and the rewriting of a connection string for the
// LISTEN connection. Core code: no libpq here, so it follows libpq's
// documented syntax (keyword strings and URIs) itself.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlm::internal {

struct SplitConninfo {
  // The string without the dlm_* parameters: what libpq gets.
  std::string libpq;
  // The dlm_* parameters in order of appearance, keyword and (decoded)
  // value.
  std::vector<std::pair<std::string, std::string>> dlm;
};

// Takes every parameter whose keyword starts with "dlm_" out of `conninfo`
// (a postgresql:// or postgres:// URI's query, or a keyword string).
// Values are percent-decoded (URI) or unquoted (keyword string). A string
// it cannot read is returned as it is (libpq's own parser then says why).
SplitConninfo splitDlmParameters(std::string_view conninfo);

// `conninfo` (already without dlm_* parameters) with its host and/or port
// replaced by `host` / `port` (each only when not empty), in the string's
// own form.
std::string withHostAndPort(std::string_view conninfo, const std::string& host,
                            const std::string& port);

}  // namespace dlm::internal
