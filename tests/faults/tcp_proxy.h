// A loopback TCP proxy between a client (the library under test) and
// PostgreSQL that can stop forwarding: a stalled server, as a hung network or
// a frozen primary looks to the client. One thread, one poll loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace dlm::test {

class TcpProxy {
 public:
  // Listens on 127.0.0.1 at an ephemeral port and forwards every accepted
  // connection to targetHost:targetPort, which must be an IPv4 loopback
  // address (the proxy never leaves the host). Stops by itself, closing every
  // connection, after `maxLifetime`, so a test that forgets it cannot hang on
  // it. Throws std::runtime_error when it cannot listen or the target is not
  // loopback.
  TcpProxy(const std::string& targetHost, int targetPort,
           std::chrono::seconds maxLifetime = std::chrono::seconds(120));
  // Stops the loop (within one poll interval) and closes every socket.
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // "host=127.0.0.1 port=<port>": a libpq connection string fragment.
  std::string conninfo() const;

  // Stops forwarding in both directions: sockets stay open, nothing is read
  // or written, new connections are accepted but get no bytes. Returns once
  // the loop has stopped forwarding.
  void stall();
  // Forwards the client's bytes to the server but keeps the server's
  // answers from the client: requests run, their replies are lost (once
  // the connections are cut) or late (after resume()).
  void holdReplies();
  // Forwards again, starting with what was buffered.
  void resume();
  // Closes every proxied connection (both sides); the listener stays open.
  // Returns once they are closed.
  void cutAll();
  // Connections accepted so far.
  std::int64_t accepted() const;

 private:
  void run();
  // Sends a command to the loop and waits until it has been carried out.
  void command(int what);

  int listenFd_ = -1;
  int wakeRead_ = -1;
  int wakeWrite_ = -1;
  int port_ = 0;
  std::uint32_t targetAddr_ = 0;  // network byte order
  int targetPort_ = 0;
  std::chrono::steady_clock::time_point stopAt_;

  mutable std::mutex mutex_;
  std::condition_variable done_;
  int pending_ = 0;  // command waiting for the loop (0: none)
  std::int64_t commandsDone_ = 0;
  std::int64_t accepted_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dlm::test
