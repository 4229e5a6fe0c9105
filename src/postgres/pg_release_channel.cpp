#include "postgres/pg_release_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "dlm/error.h"

namespace dlm::internal {
namespace {

// Connects and LISTENs by `deadline`; throws what PgConn throws.
std::unique_ptr<PgConn> startListening(const PgReleaseChannel::Connect& connect,
                                       Deadline deadline, int wakeFd) {
  std::unique_ptr<PgConn> conn = connect(deadline, wakeFd);
  conn->exec(std::string("LISTEN ") + kReleaseChannel, deadline);
  return conn;
}

// Both ends of a non-blocking, close-on-exec pipe; writing a byte wakes a
// poll() on the read end.
class WakePipe {
 public:
  WakePipe() {
    if (::pipe(fds_) != 0) {
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         "release notifications: cannot create a pipe");
    }
    for (int fd : fds_) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  ~WakePipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  WakePipe(const WakePipe&) = delete;
  WakePipe& operator=(const WakePipe&) = delete;

  int readEnd() const { return fds_[0]; }
  void wake() noexcept {
    const char byte = 1;
    // Full pipe (EAGAIN): a wake-up is already pending, which is enough.
    [[maybe_unused]] const ssize_t n = ::write(fds_[1], &byte, 1);
  }

 private:
  int fds_[2] = {-1, -1};
};

}  // namespace

// The thread and what only it touches (the connection, once started).
class PgReleaseChannel::Worker {
 public:
  Worker(PgReleaseChannel& channel, std::unique_ptr<PgConn> listening)
      : channel_(channel), listening_(std::move(listening)) {
    thread_ = std::thread([this] { run(); });
  }
  // Stops the thread (promptly: it waits in poll() on the pipe as well) and
  // closes the connection.
  ~Worker() {
    stop_ = true;
    pipe_.wake();
    thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

 private:
  void run() noexcept {
    std::chrono::milliseconds pause{0};
    while (!stop_) {
      if (!listening_) {
        // Reconnect: right away the first time, then with doubling pauses.
        if (pause.count() > 0 && !sleepUnlessWoken(pause)) break;
        pause = std::clamp(pause * 2, std::chrono::milliseconds(100),
                           kMaxReconnectPause);
        try {
          // Bounded, and cut short by stop(): the pipe is the wake fd.
          listening_ = startListening(channel_.connect_,
                                      deadlineAfter(channel_.connectTimeout_),
                                      pipe_.readEnd());
        } catch (...) {
          // Server down, refusing or silent (or stopping): try again after
          // the pause.
          continue;
        }
        pause = std::chrono::milliseconds(0);
        channel_.reconnections_.fetch_add(1, std::memory_order_relaxed);
        // LISTEN is active again; whatever was released while it was not
        // went unheard.
        missed();
      }
      // Deliver what libpq has already read (the LISTEN's reply may have
      // carried notifications), then wait for more.
      if (!drain()) {
        listening_.reset();
        continue;
      }
      const int sock = listening_->socket();
      if (sock < 0) {
        listening_.reset();
        continue;
      }
      pollfd fds[2] = {{sock, POLLIN, 0}, {pipe_.readEnd(), POLLIN, 0}};
      const int rc = ::poll(fds, 2, -1);
      if (rc < 0 && errno != EINTR) {
        // Should not happen; treat the connection as unusable.
        listening_.reset();
      }
      // The socket's readiness is acted on by the next drain().
    }
    listening_.reset();
  }

  // Reads the socket and dispatches the notifications. False when the
  // connection broke.
  bool drain() {
    // False: the backend went away (terminated, restart, keepalive expired).
    const bool ok = listening_->consumeInput();
    std::vector<std::string> keys;
    while (auto payload = listening_->nextNotification()) {
      for (std::string& key : channel_.hints_.keysFreedBy(*payload)) {
        keys.push_back(std::move(key));
      }
    }
    if (!keys.empty()) {
      std::lock_guard<std::mutex> lock(channel_.listenersMu_);
      for (const std::string& key : keys) {
        for (ReleaseListener* l : channel_.listeners_) {
          try {
            l->released(key);
          } catch (...) {
            // A listener's failure must not stop delivery to the others.
          }
        }
      }
    }
    return ok;
  }

  void missed() {
    std::lock_guard<std::mutex> lock(channel_.listenersMu_);
    for (ReleaseListener* l : channel_.listeners_) {
      try {
        l->missedReleases();
      } catch (...) {
        // As in drain().
      }
    }
  }

  // Waits `pause` unless stop() wakes it first. False when stopping.
  bool sleepUnlessWoken(std::chrono::milliseconds pause) {
    pollfd fd = {pipe_.readEnd(), POLLIN, 0};
    ::poll(&fd, 1, static_cast<int>(pause.count()));
    return !stop_;
  }

  PgReleaseChannel& channel_;
  WakePipe pipe_;
  std::unique_ptr<PgConn> listening_;  // null while reconnecting
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts once the rest exists
};

PgReleaseChannel::PgReleaseChannel(Connect connect,
                               std::chrono::milliseconds connectTimeout)
    : connect_(std::move(connect)), connectTimeout_(connectTimeout) {}

PgReleaseChannel::~PgReleaseChannel() { close(); }

bool PgReleaseChannel::subscribe(ReleaseListener* listener,
                                 std::string* whyNot) {
  std::lock_guard<std::mutex> life(lifecycleMu_);
  if (closed_) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "PostgreSQL store: subscribeReleases: store closed");
  }
  if (!worker_) {
    std::unique_ptr<PgConn> listening;
    try {
      // Connect and LISTEN here, so delivery is active when we return.
      listening = startListening(connect_, deadlineOr(connectTimeout_), -1);
    } catch (const std::exception& e) {
      // Unreachable server, or LISTEN refused: the caller polls instead.
      // (The store's messages carry no password.)
      if (whyNot != nullptr) *whyNot = e.what();
      return false;
    } catch (...) {
      if (whyNot != nullptr) *whyNot = "unknown error";
      return false;
    }
    worker_ = std::make_unique<Worker>(*this, std::move(listening));
  }
  std::lock_guard<std::mutex> lock(listenersMu_);
  listeners_.insert(listener);
  return true;
}

void PgReleaseChannel::unsubscribe(ReleaseListener* listener) noexcept {
  std::lock_guard<std::mutex> life(lifecycleMu_);
  bool none;
  {
    // Waits for a dispatch in progress; after this no callback reaches
    // `listener`.
    std::lock_guard<std::mutex> lock(listenersMu_);
    listeners_.erase(listener);
    none = listeners_.empty();
  }
  if (none) stopWorker();
}

void PgReleaseChannel::close() noexcept {
  std::lock_guard<std::mutex> life(lifecycleMu_);
  closed_ = true;
  {
    std::lock_guard<std::mutex> lock(listenersMu_);
    listeners_.clear();
  }
  stopWorker();
}

bool PgReleaseChannel::running() const {
  std::lock_guard<std::mutex> life(lifecycleMu_);
  return worker_ != nullptr;
}

void PgReleaseChannel::stopWorker() noexcept { worker_.reset(); }

}  // namespace dlm::internal
