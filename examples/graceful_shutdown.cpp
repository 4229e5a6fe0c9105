// graceful_shutdown: a long-running worker that waits for a lock and stops
// cleanly on SIGTERM, with its lock events in the application's log and its
// metrics served over HTTP for Prometheus.
//
//   graceful_shutdown DATABASE_URL PORT [WORKERS]
//
//   DATABASE_URL  sqlite:PATH, postgresql://... or "" (see dlm/store_url.h).
//                 PostgreSQL: apply the schema first (dlmctl migrate).
//   PORT          http://127.0.0.1:PORT/metrics serves the metrics (0: any
//                 free port; the line "metrics: http://..." names it).
//
// WORKERS threads (2) want the lock "jobs.compactor": one holds it and works
// in short steps (a LockGuard renews its lease), the others wait in
// acquireLock as hot standbys (run it twice and the second process waits
// too). Lock events go to a logger, here stderr lines with a level. On
// SIGTERM or SIGINT, stopWaiting() makes the waiting threads give up at once,
// the working one ends its step and releases, and the program exits: 0 when
// every lock it acquired was released. (examples/graceful_shutdown_test.sh
// starts it, reads the metrics, sends SIGTERM and times the exit.)
#include <arpa/inet.h>
#include <dlm/dlm.h>
#include <dlm/store_url.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::atomic<bool> stopping{false};
std::atomic<int> failures{0};

void work(dlm::DistributedLockManager& manager, int worker) {
  try {
    while (!stopping) {
      dlm::Lock lock =
          manager.getLockInstance("jobs.compactor", dlm::LockLevel::DC);
      try {
        manager.acquireLock(lock, 15s, 10min);  // a 15 s lease; wait 10 min
      } catch (const dlm::DLMException& e) {
        // Stopped (or timed out): the loop looks at `stopping`.
        if (e.code() == dlm::ErrorCode::LOCK_UNAVAILABLE) continue;
        throw;
      }
      // Held (also when a wait won just before the stop): renewed while we
      // work, released when the guard goes.
      dlm::LockGuard guard(manager, std::move(lock));
      std::printf("worker %d: holds jobs.compactor, working\n", worker);
      while (!stopping && !guard.lost()) {  // one step of the work at a time
        std::this_thread::sleep_for(100ms);
      }
      const bool released = guard.release();
      std::printf("worker %d: %s\n", worker,
                  released ? "released jobs.compactor" : "had lost it");
    }
    std::printf("worker %d: stopped\n", worker);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker %d: %s\n", worker, e.what());
    ++failures;
    kill(getpid(), SIGTERM);  // shut the program down
  }
}

// A tiny blocking HTTP server, one request at a time: enough for a scrape.
// Every request gets the metrics.
int listenOn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof addr;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), size) != 0 ||
      listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
    throw std::runtime_error("port " + std::to_string(port) + ": " +
                             std::strerror(errno));
  }
  std::printf("metrics: http://127.0.0.1:%d/metrics\n", ntohs(addr.sin_port));
  return fd;
}

void serveMetrics(int listener, dlm::DistributedLockManager& manager) {
  while (!stopping) {
    pollfd ready{listener, POLLIN, 0};
    if (poll(&ready, 1, 200) <= 0) continue;  // look at `stopping` now and then
    const int client = accept(listener, nullptr, nullptr);
    if (client < 0) continue;
    const timeval patience{1, 0};  // a silent client does not hold us up
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof patience);
    char request[2048];
    if (recv(client, request, sizeof request, 0) > 0) {
      const std::string body = dlm::toPrometheusText({manager.metrics()});
      const std::string response =
          "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      for (std::size_t sent = 0; sent < response.size();) {
        const ssize_t k = send(client, response.data() + sent,
                               response.size() - sent, MSG_NOSIGNAL);
        if (k <= 0) break;
        sent += static_cast<std::size_t>(k);
      }
    }
    close(client);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: graceful_shutdown DATABASE_URL PORT [WORKERS]\n");
    return 2;
  }
  // Each line at once, also into a file.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string url = argv[1];
  const int workers = argc > 3 ? std::atoi(argv[3]) : 2;
  // SIGTERM and SIGINT are taken by sigwait below, on this thread; blocked
  // first, so that every thread started afterwards has them blocked too.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  try {
    static std::mutex logMutex;  // the "application's logger"
    auto logger =
        dlm::makeLineEventHandler([](int severity, const std::string& line) {
          std::lock_guard<std::mutex> hold(logMutex);
          std::fprintf(stderr, "%s %s\n", severity <= 4 ? "WARN" : "INFO",
                       line.c_str());
        });
    auto manager =
        dlm::DistributedLockManager::builder()
            .clientId("compactor")
            .farmId("example")
            .store(dlm::openStore(url))
            .events(logger)
            .build();
    manager->initialize();

    const int listener = listenOn(std::atoi(argv[2]));
    std::thread http(serveMetrics, listener, std::ref(*manager));
    std::vector<std::thread> threads;
    for (int w = 1; w <= workers; ++w) {
      threads.emplace_back(work, std::ref(*manager), w);
    }

    int signal = 0;
    sigwait(&signals, &signal);
    std::printf("%s: stop waiting, finish the step, release\n",
                strsignal(signal));
    stopping = true;
    manager->stopWaiting();  // waiting acquireLock calls give up now
    for (auto& t : threads) t.join();
    http.join();
    close(listener);

    const dlm::LockMetrics m = manager->metrics();
    std::printf("acquired %llu times, released %llu times\n",
                static_cast<unsigned long long>(m.acquisitions),
                static_cast<unsigned long long>(m.releases));
    const bool ok =
        failures == 0 && m.acquisitions == m.releases && m.releaseFailures == 0;
    std::printf(ok ? "OK: stopped cleanly\n" : "FAILED\n");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graceful_shutdown: %s\n", e.what());
    return 1;
  }
}
