// A TcpProxy in front of the PostgreSQL server named by PGHOST / PGPORT, and
// the URL that reaches a store environment's database through it.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "faults/server_control.h"
#include "faults/tcp_proxy.h"
#include "support/test_stores.h"

namespace dlm::test::faults {

// Throws (failing the test) when PGHOST is not a loopback IPv4 address or
// PGPORT is missing: the proxy only ever forwards on the host.
inline std::unique_ptr<TcpProxy> proxyToServer() {
  const char* host = std::getenv("PGHOST");
  const char* port = std::getenv("PGPORT");
  if (!host || !port) {
    throw std::runtime_error(
        "PGHOST and PGPORT must name the throwaway cluster (scripts/test.sh)");
  }
  // 60 s is longer than any test here; it bounds a forgotten proxy.
  return std::make_unique<TcpProxy>(host, std::atoi(port),
                                    std::chrono::seconds(60));
}

// The environment's database and role, through the proxy; libpq takes the
// database name from PGDATABASE.
inline std::string proxiedUrl(const StoreEnvironment& env,
                              const TcpProxy& proxy) {
  return fmt::format("postgresql://{}@127.0.0.1:{}", roleOfUrl(env.url()),
                     proxy.port());
}

}  // namespace dlm::test::faults
