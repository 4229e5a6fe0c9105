// readers_writers: SHARED and EXCLUSIVE locks on one key. Readers hold
// "catalog" SHARED, any number at once; a writer holds it EXCLUSIVE, alone.
// A waiting writer goes before readers that arrive after it (fair queueing),
// so writers are served while readers keep coming.
//
//   readers_writers DATABASE_URL [READERS] [WRITERS] [ROUNDS]
//
//   DATABASE_URL  sqlite:PATH, postgresql://... or "" (see dlm/store_url.h).
//                 PostgreSQL: apply the schema first (dlmctl migrate).
//
// READERS (4) and WRITERS (2) threads each take the lock ROUNDS (5) times and
// count who is inside: a writer must find nobody else, a reader no writer.
// Readers also ask the store how many hold the key (describeHolders). Exits 0
// when no one ever met a conflicting holder and readers did share the lock.
#include <dlm/dlm.h>
#include <dlm/store_url.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::atomic<int> readersInside{0}, writersInside{0};
std::atomic<int> conflicts{0}, failures{0};
// The most SHARED holders the store listed at once.
std::atomic<int> mostHolders{0};

void raiseTo(std::atomic<int>& most, int value) {
  int seen = most.load();
  while (value > seen && !most.compare_exchange_weak(seen, value)) {
  }
}

void session(dlm::DistributedLockManager& manager, dlm::LockMode mode,
             int rounds) {
  const bool reader = mode == dlm::LockMode::SHARED;
  try {
    if (!reader) std::this_thread::sleep_for(50ms);  // readers come first
    for (int round = 0; round < rounds; ++round) {
      dlm::Lock lock =
          manager.getLockInstance("catalog", dlm::LockLevel::DC, mode);
      manager.acquireLock(lock, 10s, 30s);  // a 10 s lease; wait up to 30 s
      if (reader) {
        ++readersInside;
        if (writersInside > 0) ++conflicts;
        raiseTo(mostHolders,
                static_cast<int>(manager.describeHolders(lock).size()));
        std::this_thread::sleep_for(100ms);  // reading
        --readersInside;
      } else {
        if (++writersInside != 1 || readersInside > 0) ++conflicts;
        std::this_thread::sleep_for(30ms);  // writing
        --writersInside;
      }
      manager.releaseLock(lock);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", reader ? "reader" : "writer", e.what());
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "";
  const int readers = argc > 2 ? std::atoi(argv[2]) : 4;
  const int writers = argc > 3 ? std::atoi(argv[3]) : 2;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 5;
  try {
    auto manager =
        dlm::DistributedLockManager::builder()
            .clientId("library")
            .farmId("example")
            .store(dlm::openStore(url))
            .build();
    manager->initialize();
    std::printf(
        "%d readers (SHARED) and %d writers (EXCLUSIVE), %d rounds each\n",
        readers, writers, rounds);

    // Each thread is its own lock owner, as separate processes would be.
    std::vector<std::thread> threads;
    for (int i = 0; i < readers + writers; ++i) {
      const auto mode =
          i < readers ? dlm::LockMode::SHARED : dlm::LockMode::EXCLUSIVE;
      threads.emplace_back(session, std::ref(*manager), mode, rounds);
    }
    for (auto& t : threads) t.join();

    const dlm::LockMetrics m = manager->metrics();
    std::printf("acquisitions: %llu, of which had to wait: %llu\n",
                static_cast<unsigned long long>(m.acquisitions),
                static_cast<unsigned long long>(m.waits));
    std::printf("most readers holding at once (describeHolders): %d\n",
                mostHolders.load());
    std::printf("conflicting holders met: %d\n", conflicts.load());
    const bool ok =
        failures == 0 && conflicts == 0 && (readers < 2 || mostHolders >= 2);
    std::printf(ok ? "OK\n" : "FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "readers_writers: %s\n", e.what());
    return 1;
  }
}
