// The PostgreSQL store's release notifications: LISTEN dlm_release on one
// connection of its own, and one thread delivering the freed keys to the
// subscribed ReleaseListeners.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "dlm/deadline.h"
#include "dlm/lock_store.h"
#include "postgres/pg_conn.h"
#include "postgres/release_hints.h"

namespace dlm::internal {

// The channel the dlm_* functions NOTIFY on; the payload is hints, not the
// freed key (release_hints.h). Channels are per database, not per schema: a
// store also hears releases from other dlm schemas in the same database
// (their hints match none of its keys).
inline constexpr const char* kReleaseChannel = "dlm_release";

// One listening connection and one thread, both started by the first
// subscribe() and stopped when the last listener unsubscribes or on close().
//
// The thread sleeps in poll() on the connection's socket and on a self-pipe
// (so stopping is prompt), and dispatches each notification's payload to
// every listener as the waited keys it may unblock (hints()), holding the
// listener mutex: once unsubscribe() returns, no
// callback on that listener is running or will run. When the connection
// breaks, the thread opens a new one (with growing pauses, up to
// kMaxReconnectPause), LISTENs again and then calls missedReleases() on
// every listener, since releases in between went unheard.
//
// Connecting and LISTEN are bounded by `connectTimeout` (or the caller's
// deadline in subscribe); a stop interrupts a reconnection at once. A
// connection that dies silently (no FIN/RST from a lost host) is noticed by
// TCP keepalive, which the store's connection parameters turn on. Waiters
// poll in any case (sleepBetweenRetries).
//
// Thread-safe. Listeners' callbacks must not call back into the channel.
class PgReleaseChannel {
 public:
  // The longest pause between two reconnection attempts.
  static constexpr std::chrono::milliseconds kMaxReconnectPause{5000};

  // Opens a connection by the deadline; the wake descriptor (or -1) aborts
  // the wait when readable (PgConn::open).
  using Connect = std::function<std::unique_ptr<PgConn>(Deadline, int)>;

  // Opens nothing yet.
  PgReleaseChannel(Connect connect, std::chrono::milliseconds connectTimeout);
  // close().
  ~PgReleaseChannel();
  PgReleaseChannel(const PgReleaseChannel&) = delete;
  PgReleaseChannel& operator=(const PgReleaseChannel&) = delete;

  // Adds `listener` (borrowed until unsubscribe returns). The first one
  // opens the connection and runs LISTEN before this returns, so a release
  // committed after it returns is delivered. False, and nothing kept, when
  // the connection cannot be opened or the server refuses LISTEN (a hot
  // standby, an engine without LISTEN): the caller polls, and may try again
  // later; `whyNot` (when given) then says why. Throws DLMException
  // INTERNAL_ERROR after close(). Blocks for the connection set-up: until
  // currentDeadline(), or connectTimeout.
  bool subscribe(ReleaseListener* listener, std::string* whyNot = nullptr);

  // Removes `listener`; no call to it is running or made after this returns.
  // The last one stops the thread and closes the connection (waiting for a
  // reconnection attempt in progress, if any). Never throws.
  void unsubscribe(ReleaseListener* listener) noexcept;

  // Drops every listener, stops the thread, closes the connection; later
  // subscribes throw. Idempotent.
  void close() noexcept;

  // The waited keys notifications are matched against; the store adds a
  // key's hints before its waiter's next attempt.
  ReleaseHints& hints() { return hints_; }

  // Whether the listening thread runs (tests).
  bool running() const;

  // How many times the thread re-opened a listening connection that broke.
  std::uint64_t reconnections() const {
    return reconnections_.load(std::memory_order_relaxed);
  }

 private:
  class Worker;

  void stopWorker() noexcept;  // needs lifecycleMu_

  const Connect connect_;
  ReleaseHints hints_;
  std::atomic<std::uint64_t> reconnections_{0};
  const std::chrono::milliseconds connectTimeout_;

  // Serialises subscribe / unsubscribe / close (starting and stopping the
  // worker). Never taken by the worker thread.
  mutable std::mutex lifecycleMu_;
  std::unique_ptr<Worker> worker_;  // guarded by lifecycleMu_
  bool closed_ = false;             // guarded by lifecycleMu_

  // Held by the worker while it calls listeners.
  std::mutex listenersMu_;
  std::set<ReleaseListener*> listeners_;  // guarded by listenersMu_
};

}  // namespace dlm::internal
