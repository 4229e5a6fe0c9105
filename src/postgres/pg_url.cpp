// The PostgreSQL half of parseStoreUrl: libpq's own parser for the
// location, dlm's own dlm_* parameters taken out first.
#include "postgres/pg_url.h"

#include <fmt/format.h>

#include <cctype>
#include <string>

#include "common/redact.h"
#include "dlm/error.h"
#include "postgres/conninfo_parameters.h"
#include "postgres/conninfo_text.h"
#include "postgres/pg_conninfo.h"

namespace dlm {
namespace internal {
namespace {

// parseStoreUrl appends the forms that would have worked.
[[noreturn]] void refuse(const std::string& why) {
  throw DLMException(ErrorCode::INVALID_ARGUMENT, why);
}

bool parseFlag(const std::string& keyword, const std::string& value) {
  std::string v;
  for (const char c : value) v += static_cast<char>(std::tolower(c));
  if (v == "true" || v == "1" || v == "on" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "off" || v == "no") return false;
  refuse(fmt::format("{}='{}' is neither true nor false", keyword,
                     internal::redactSecrets(value)));
}

SynchronousReplication parseReplication(const std::string& value) {
  if (value == "not_checked") return SynchronousReplication::NOT_CHECKED;
  if (value == "warn") return SynchronousReplication::WARN;
  if (value == "required") return SynchronousReplication::REQUIRED;
  refuse(
      fmt::format("dlm_synchronous_replication='{}' is not one of "
                  "not_checked, warn, required",
                  internal::redactSecrets(value)));
}

// dlm's own parameters of a PostgreSQL URL into `parsed`.
void applyDlmParameters(
    const std::vector<std::pair<std::string, std::string>>& parameters,
    ParsedStoreUrl& parsed) {
  std::string listenHost;
  std::string listenPort;
  for (const auto& [keyword, value] : parameters) {
    if (keyword == "dlm_pooler_safe") {
      parsed.poolerSafe = parseFlag(keyword, value);
    } else if (keyword == "dlm_listen_host") {
      listenHost = value;
    } else if (keyword == "dlm_listen_port") {
      listenPort = value;
    } else if (keyword == "dlm_synchronous_replication") {
      parsed.synchronousReplication = parseReplication(value);
    } else {
      refuse(fmt::format(
          "unknown dlm parameter '{}' (dlm's are dlm_pooler_safe, "
          "dlm_listen_host, dlm_listen_port, dlm_synchronous_replication)",
          internal::redactSecrets(keyword)));
    }
  }
  if (!listenPort.empty()) {
    // libpq checks a port only when it connects: a typo would only turn
    // wake-ups off.
    if (!internal::isDigits(listenPort) || listenPort.size() > 5 ||
        std::stoi(listenPort) < 1 || std::stoi(listenPort) > 65535) {
      refuse(fmt::format("dlm_listen_port must be a port number (1 to "
                         "65535), got '{}'",
                         internal::redactSecrets(listenPort)));
    }
  }
  if (!listenHost.empty() || !listenPort.empty()) {
    parsed.listenConnection =
        internal::withHostAndPort(parsed.location, listenHost, listenPort);
  }
}

}  // namespace

ParsedStoreUrl parsePostgresUrl(const std::string& url) {
  const internal::SplitConninfo split = internal::splitDlmParameters(url);
  ParsedStoreUrl parsed;
  parsed.kind = StoreKind::POSTGRES;
  parsed.location = split.libpq;
  try {
    // libpq's own parser: exactly what the store will accept. Failing here
    // (not at the first connect) makes a typo INVALID_ARGUMENT rather than
    // a transient connection error that callers would retry.
    internal::checkConninfo(parsed.location);
  } catch (const DLMException& e) {
    refuse(e.what());  // already redacted
  }
  applyDlmParameters(split.dlm, parsed);
  if (!parsed.listenConnection.empty()) {
    try {
      internal::checkConninfo(parsed.listenConnection);
    } catch (const DLMException& e) {
      refuse(std::string("the LISTEN connection (dlm_listen_host, "
                         "dlm_listen_port): ") +
             e.what());
    }
  }
  return parsed;
}

}  // namespace internal
}  // namespace dlm
