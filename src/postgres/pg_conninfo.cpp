#include "postgres/pg_conninfo.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <netdb.h>
#include <sys/socket.h>

#include <map>
#include <memory>
#include <vector>

#include "common/redact.h"
#include "dlm/error.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_session.h"

namespace dlm::internal {
namespace {

// libpq's defaults for what a connection string leaves out: PG* variables,
// the service file, the OS user name, port 5432.
std::map<std::string, std::string, std::less<>> libpqDefaults() {
  struct Free {
    void operator()(PQconninfoOption* o) const noexcept { PQconninfoFree(o); }
  };
  std::map<std::string, std::string, std::less<>> out;
  const std::unique_ptr<PQconninfoOption, Free> options(PQconndefaults());
  // nullptr only when out of memory: the description then says less.
  if (!options) return out;
  for (const PQconninfoOption* o = options.get(); o->keyword; ++o) {
    if (o->val != nullptr && *o->val != '\0') out[o->keyword] = o->val;
  }
  return out;
}

}  // namespace

void checkConninfo(std::string_view conninfo) {
  // ConnParams::parse is the store's own reading of the string (redacted
  // INVALID_ARGUMENT on failure); checking with it means the store will
  // accept what openStore accepted.
  (void)ConnParams::parse(conninfo);
}

bool conninfoHasPassword(std::string_view conninfo) {
  return ConnParams::parse(conninfo).has("password");
}

std::string describeConninfo(std::string_view conninfo) {
  const ConnParams explicitly = ConnParams::parse(conninfo);
  auto values = libpqDefaults();
  for (const auto& [keyword, value] : explicitly.items()) {
    values[keyword] = value;
  }
  auto get = [&](const char* keyword) {
    const auto it = values.find(keyword);
    return it == values.end() ? std::string() : it->second;
  };
  const std::string user = get("user");
  std::string hostList = get("host");
  if (hostList.empty()) hostList = get("hostaddr");
  // libpq connects to the user's own database when none is named.
  std::string dbname = get("dbname");
  if (dbname.empty()) dbname = user;

  const auto hosts = splitCommas(hostList);
  const auto ports = splitCommas(get("port"));
  std::string authority;
  std::string socketDir;  // a Unix socket directory is no URI authority
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const std::string& host = hosts[i];
    if (!host.empty() && host.front() == '/') {
      if (socketDir.empty()) socketDir = host;
      continue;
    }
    if (!authority.empty()) authority += ',';
    authority += host.find(':') != std::string::npos ? "[" + host + "]" : host;
    const std::string& port = ports[std::min(i, ports.size() - 1)];
    if (!port.empty()) authority += ":" + port;
  }
  std::string uri = "postgresql://";
  if (!user.empty()) uri += user + "@";
  uri += authority + "/" + dbname;
  if (!socketDir.empty()) uri += "?host=" + socketDir;
  // A dbname may itself hold a connection string (libpq expands it).
  return redactSecrets(uri);
}

void requireResolvableHosts(std::string_view conninfo, std::string_view what) {
  const ConnParams params = ConnParams::parse(conninfo);
  std::string hosts;
  for (const auto& [keyword, value] : params.items()) {
    if (keyword == "hostaddr" && !value.empty()) return;  // no name lookup
    if (keyword == "host") hosts = value;
  }
  for (const std::string& host : splitCommas(hosts)) {
    // Empty: libpq's default; '/' or '@': a Unix-domain socket.
    if (host.empty() || host.front() == '/' || host.front() == '@') continue;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (found != nullptr) ::freeaddrinfo(found);
    if (rc == EAI_NONAME || rc == EAI_FAIL
#ifdef EAI_NODATA
        || rc == EAI_NODATA
#endif
    ) {
      throw DLMException(
          ErrorCode::INVALID_ARGUMENT,
          fmt::format("{}: host \"{}\" does not resolve ({})", what,
                      redactSecrets(host), ::gai_strerror(rc)));
    }
  }
}

}  // namespace dlm::internal
