// one_node_job: a job that must run on one node only, such as a nightly
// import. Every node starts it (from cron, say); each tries the lock once,
// the node that gets it runs the job, the others get LOCK_UNAVAILABLE and
// skip it.
//
//   one_node_job DATABASE_URL [NODE_NAME] [JOB_SECONDS]
//
//   DATABASE_URL  sqlite:PATH, postgresql://... or "" (see dlm/store_url.h).
//                 PostgreSQL: apply the schema first (dlmctl migrate).
//   NODE_NAME     printed in its lines (default "node"); JOB_SECONDS how long
//                 the pretend import takes (default 3).
//
// Try it: start it a few times at once on one database, e.g.
//   for n in 1 2 3; do ./one_node_job sqlite:/tmp/locks.sqlite node$n & done;
//   wait
// One prints "running the import", the others "skipped".
// (examples/one_node_job_test.sh does that and checks it.) Exits 0 when it
// ran the job or rightly skipped it, 1 on an error.
//
// DistributedLockManager::tryWithLock(id, level, fn) does the same in one
// call (false: skipped); here the steps are spelled out.
#include <dlm/dlm.h>
#include <dlm/store_url.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const std::string url = argc > 1 ? argv[1] : "";
  const std::string node = argc > 2 ? argv[2] : "node";
  const int jobSeconds = argc > 3 ? std::atoi(argv[3]) : 3;
  try {
    auto manager =
        dlm::DistributedLockManager::builder()
            .clientId("etl")
            .store(dlm::openStore(url))
            .build();
    manager->initialize();

    // XDC: one holder across every farm (data centre) of the client "etl".
    dlm::Lock lock =
        manager->getLockInstance("nightly.import", dlm::LockLevel::XDC);
    try {
      manager->tryAcquireLock(lock, 1min);  // one attempt, a 1-minute lease
    } catch (const dlm::DLMException& e) {
      if (e.code() != dlm::ErrorCode::LOCK_UNAVAILABLE) throw;
      std::printf("%s: skipped: another node runs the import (%s)\n",
                  node.c_str(), e.what());
      return 0;
    }
    // Renews the 1-minute lease while the job runs; releases when it ends.
    dlm::LockGuard guard(*manager, std::move(lock));
    std::printf("%s: running the import (fencing token %lld)\n", node.c_str(),
                static_cast<long long>(guard.lock().fencingToken()));
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(jobSeconds));  // import
    if (guard.lost()) {
      std::printf("%s: lost the lock during the import\n", node.c_str());
      return 1;
    }
    if (!guard.release()) {
      std::printf("%s: the lock was taken over before the release\n",
                  node.c_str());
      return 1;
    }
    std::printf("%s: import done, lock released\n", node.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "one_node_job %s: %s\n", node.c_str(), e.what());
    return 1;
  }
}
