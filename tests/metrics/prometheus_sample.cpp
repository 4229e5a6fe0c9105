// Prints the Prometheus text of two managers after real work on a SQLite
// file (acquisitions, a wait that times out, a deadlock, releases), for
// check_prometheus.py to parse with the Prometheus client library's parser.
//
//   dlm_prometheus_sample DIR
#include <cstdio>
#include <iostream>
#include <string>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "dlm/store_url.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  using namespace std::chrono_literals;
  try {
    auto store =
        dlm::openStore(std::string("sqlite:") + argv[1] + "/metrics.sqlite");
    dlm::LockConfiguration config;
    config.sleepBetweenRetries = 20ms;
    auto make = [&](const char* client) {
      auto m = dlm::DistributedLockManager::builder()
                   .clientId(client)
                   .farmId("f")
                   .store(store)
                   .configuration(config)
                   .applyMigrations(true)
                   .build();
      m->initialize();
      return m;
    };
    auto a = make("app \"a\"");
    auto b = make("b");
    for (int i = 0; i < 20; ++i) {
      dlm::Lock l = a->getLockInstance("job." + std::to_string(i % 3),
                                       dlm::LockLevel::DC);
      a->acquireLock(l, 30s, 1s);
      a->releaseLock(l);
    }
    dlm::Lock held = b->getLockInstance("x", dlm::LockLevel::DC);
    b->tryAcquireLock(held);
    dlm::Lock same = b->getLockInstance("x", dlm::LockLevel::DC);
    try {
      b->acquireLock(same, 30s, 1s);  // held by this thread's owner
    } catch (const dlm::DLMException&) {
    }
    b->releaseLock(held);
    std::cout << dlm::toPrometheusText({a->metrics(), b->metrics()});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlm_prometheus_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
