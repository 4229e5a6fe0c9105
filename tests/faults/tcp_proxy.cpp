#include "faults/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace dlm::test {
namespace {

enum Command { kNone = 0, kStall, kHoldReplies, kResume, kCut, kStop };

// Bytes buffered per direction before the proxy stops reading that side:
// keeps memory bounded when one side does not drain.
constexpr std::size_t kMaxBuffered = 1 << 20;
// How often the loop checks its lifetime even when nothing happens.
constexpr int kPollMs = 100;

std::runtime_error sysError(const std::string& what) {
  return std::runtime_error("TcpProxy: " + what + ": " + std::strerror(errno));
}

void setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// One proxied connection: the client's socket, ours to the server, and what
// each side sent that the other has not taken yet.
struct Pair {
  int client = -1;
  int server = -1;
  std::string toServer;
  std::string toClient;
  bool closed = false;
};

void closePair(Pair& p) {
  if (p.client >= 0) close(p.client);
  if (p.server >= 0) close(p.server);
  p.client = p.server = -1;
  p.closed = true;
}

// Reads what `from` has into `buffer`; false when the side closed or failed.
bool pull(int from, std::string& buffer) {
  char chunk[64 * 1024];
  const ssize_t n = read(from, chunk, sizeof chunk);
  if (n > 0) {
    buffer.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EINTR);
}

// Writes as much of `buffer` to `to` as it takes; false when it failed.
bool push(int to, std::string& buffer) {
  if (buffer.empty()) return true;
  const ssize_t n = send(to, buffer.data(), buffer.size(), MSG_NOSIGNAL);
  if (n >= 0) {
    buffer.erase(0, static_cast<std::size_t>(n));
    return true;
  }
  return errno == EAGAIN || errno == EINTR;
}

}  // namespace

TcpProxy::TcpProxy(const std::string& targetHost, int targetPort,
                   std::chrono::seconds maxLifetime)
    : targetPort_(targetPort),
      stopAt_(std::chrono::steady_clock::now() + maxLifetime) {
  in_addr addr{};
  if (inet_pton(AF_INET, targetHost.c_str(), &addr) != 1 ||
      (ntohl(addr.s_addr) >> 24) != 127) {
    throw std::runtime_error(
        "TcpProxy: the target must be an IPv4 loopback "
        "address, not '" +
        targetHost + "'");
  }
  targetAddr_ = addr.s_addr;

  listenFd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) throw sysError("socket");
  sockaddr_in local{};
  local.sin_family = AF_INET;
  local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  local.sin_port = 0;  // ephemeral: parallel test runs never collide
  socklen_t len = sizeof local;
  if (bind(listenFd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      listen(listenFd_, 64) != 0 ||
      getsockname(listenFd_, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
    const auto e = sysError("listen on 127.0.0.1");
    close(listenFd_);
    throw e;
  }
  port_ = ntohs(local.sin_port);
  setNonBlocking(listenFd_);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    const auto e = sysError("pipe");
    close(listenFd_);
    throw e;
  }
  wakeRead_ = fds[0];
  wakeWrite_ = fds[1];
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  command(kStop);
  if (thread_.joinable()) thread_.join();
  close(listenFd_);
  close(wakeRead_);
  close(wakeWrite_);
}

std::string TcpProxy::conninfo() const {
  return "host=127.0.0.1 port=" + std::to_string(port_);
}

void TcpProxy::stall() { command(kStall); }
void TcpProxy::holdReplies() { command(kHoldReplies); }
void TcpProxy::resume() { command(kResume); }
void TcpProxy::cutAll() { command(kCut); }

std::int64_t TcpProxy::accepted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return accepted_;
}

void TcpProxy::command(int what) {
  std::unique_lock<std::mutex> lock(mutex_);
  // One command at a time; a loop that ended (lifetime) takes none.
  done_.wait(lock, [this] { return pending_ == kNone || stopping_; });
  if (stopping_) return;
  pending_ = what;
  const std::int64_t ticket = commandsDone_ + 1;
  const char byte = 1;
  // The pipe is non-blocking; a full pipe already holds a wake-up.
  (void)!write(wakeWrite_, &byte, 1);
  done_.wait(lock, [&] { return commandsDone_ >= ticket || stopping_; });
}

void TcpProxy::run() {
  std::vector<Pair> pairs;
  bool stalled = false;
  bool holding = false;  // the server's bytes are kept from the client
  auto closeAll = [&] {
    for (auto& p : pairs) closePair(p);
    pairs.clear();
  };

  for (;;) {
    // Commands first, so that stall() returning means nothing more moves.
    int what = kNone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      what = pending_;
    }
    if (std::chrono::steady_clock::now() >= stopAt_) {
      std::fprintf(stderr, "TcpProxy: maximum lifetime reached, stopping\n");
      what = kStop;
    }
    if (what != kNone) {
      if (what == kStall) stalled = true;
      if (what == kHoldReplies) holding = true;
      if (what == kResume) stalled = holding = false;
      if (what == kCut || what == kStop) closeAll();
      std::lock_guard<std::mutex> lock(mutex_);
      pending_ = kNone;
      ++commandsDone_;
      if (what == kStop) stopping_ = true;
      done_.notify_all();
      if (what == kStop) return;
    }

    std::vector<pollfd> fds;
    fds.push_back({wakeRead_, POLLIN, 0});
    fds.push_back({listenFd_, POLLIN, 0});
    if (!stalled) {
      for (const auto& p : pairs) {
        short c = 0, s = 0;
        if (p.toServer.size() < kMaxBuffered) c |= POLLIN;
        if (p.toClient.size() < kMaxBuffered) s |= POLLIN;
        if (!p.toClient.empty() && !holding) c |= POLLOUT;
        if (!p.toServer.empty()) s |= POLLOUT;
        fds.push_back({p.client, c, 0});
        fds.push_back({p.server, s, 0});
      }
    }
    if (poll(fds.data(), fds.size(), kPollMs) < 0 && errno != EINTR) {
      std::fprintf(stderr, "TcpProxy: poll: %s\n", std::strerror(errno));
      closeAll();
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      done_.notify_all();
      return;
    }
    if (fds[0].revents & POLLIN) {
      char drain[64];
      while (read(wakeRead_, drain, sizeof drain) > 0) {
      }
    }
    if (!stalled) {
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        Pair& p = pairs[i];
        const short cr = fds[2 + 2 * i].revents;
        const short sr = fds[3 + 2 * i].revents;
        bool ok = true;
        if (cr & (POLLIN | POLLHUP | POLLERR))
          ok = ok && pull(p.client, p.toServer);
        if (sr & (POLLIN | POLLHUP | POLLERR))
          ok = ok && pull(p.server, p.toClient);
        ok = ok && push(p.server, p.toServer) &&
             (holding || push(p.client, p.toClient));
        // Either side gone: a half-open PostgreSQL session is useless, so the
        // other side is closed too (as a dead server or client would be).
        if (!ok) closePair(p);
      }
      pairs.erase(std::remove_if(pairs.begin(), pairs.end(),
                                 [](const Pair& p) { return p.closed; }),
                  pairs.end());
    }
    // New connections are accepted even while stalled: the kernel would
    // complete the handshake anyway; they just get no bytes until resume().
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int client =
            accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (client < 0) break;
        const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in target{};
        target.sin_family = AF_INET;
        target.sin_addr.s_addr = targetAddr_;
        target.sin_port = htons(static_cast<std::uint16_t>(targetPort_));
        // A blocking connect on loopback answers at once (accepted or
        // refused); refused means the server is down, so the client sees
        // its connection closed, as it would without the proxy.
        if (server < 0 || connect(server, reinterpret_cast<sockaddr*>(&target),
                                  sizeof target) != 0) {
          if (server >= 0) close(server);
          close(client);
          continue;
        }
        setNonBlocking(server);
        const int one = 1;
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Pair p;
        p.client = client;
        p.server = server;
        pairs.push_back(std::move(p));
        std::lock_guard<std::mutex> lock(mutex_);
        ++accepted_;
      }
    }
  }
}

}  // namespace dlm::test
