#include "sqlite/release_wake_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#ifdef __linux__
#include <sys/eventfd.h>
#include <sys/inotify.h>
#endif

namespace dlm::internal::sqlite {

std::string wakeFilePath(const std::string& databaseFile) {
  return databaseFile + "-dlmwake";
}

void signalWake(const std::string& databaseFile) noexcept {
  try {
    signalWakeFile(wakeFilePath(databaseFile));
  } catch (...) {
    // Building the path can only fail for lack of memory: a lost wake-up.
  }
}

void signalWakeFile(const std::string& wakePath) noexcept {
  // No O_CREAT: a missing file means no process watches it. O_NONBLOCK so
  // that a FIFO someone put in its place cannot hold the release up.
  const int fd =
      ::open(wakePath.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return;
  // Any content will do; a counter makes a hexdump show activity.
  static std::atomic<std::uint64_t> sequence{0};
  const std::uint64_t value = ++sequence;
  // One write at offset 0: the file never grows. A short or failed write
  // only loses the wake-up (the watchers' waiters poll).
  (void)::pwrite(fd, &value, sizeof value, 0);
  ::close(fd);
}

#ifdef __linux__

namespace {

// Creates the wake file with the database file's permissions (and owner,
// when running as root), as SQLite does for "-wal" and "-shm"; accepts an
// existing regular file. False when it cannot be used.
bool ensureWakeFile(const std::string& databaseFile) {
  struct stat database {};
  if (::stat(databaseFile.c_str(), &database) != 0) return false;
  const std::string path = wakeFilePath(databaseFile);
  const mode_t mode = database.st_mode & 0777;
  int fd = ::open(path.c_str(),
                  O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd >= 0) {
    // The umask may have narrowed the mode: writers need the database's.
    (void)::fchmod(fd, mode);
    if (::geteuid() == 0) {
      (void)::fchown(fd, database.st_uid, database.st_gid);
    }
  } else if (errno == EEXIST) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return false;
  } else {
    return false;
  }
  struct stat wake {};
  const bool regular = ::fstat(fd, &wake) == 0 && S_ISREG(wake.st_mode);
  ::close(fd);
  return regular;
}

constexpr std::uint32_t kWatchMask =
    IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;
// The database file itself: unlinked (its link count changes: IN_ATTRIB),
// renamed, or gone. The holds made through it are over; an early wake-up
// makes this process's waiters and keep-alive find out at their next call
// (the store checks the file's identity) instead of at their next turn.
constexpr std::uint32_t kDatabaseWatchMask =
    IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;

}  // namespace

std::unique_ptr<WakeWatcher> WakeWatcher::start(const std::string& databaseFile,
                                                std::function<void()> onWake) {
  try {
    if (!ensureWakeFile(databaseFile)) return nullptr;
    const int inotifyFd = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (inotifyFd < 0) return nullptr;
    const int watch = ::inotify_add_watch(
        inotifyFd, wakeFilePath(databaseFile).c_str(), kWatchMask);
    // Best effort: without it, a vanished file is noticed at the next call.
    if (watch >= 0) {
      (void)::inotify_add_watch(inotifyFd, databaseFile.c_str(),
                                kDatabaseWatchMask);
    }
    const int stopFd = watch < 0 ? -1 : ::eventfd(0, EFD_CLOEXEC);
    if (watch < 0 || stopFd < 0) {
      ::close(inotifyFd);
      return nullptr;
    }
    std::unique_ptr<WakeWatcher> watcher(new WakeWatcher(
        databaseFile, std::move(onWake), inotifyFd, watch, stopFd));
    watcher->thread_ = new std::thread([w = watcher.get()] { w->run(); });
    return watcher;
  } catch (...) {
    // Out of memory or no thread to be had (the descriptors are closed by
    // the destructor when the object exists): waiters poll.
    return nullptr;
  }
}

WakeWatcher::WakeWatcher(std::string databaseFile, std::function<void()> onWake,
                         int inotifyFd, int watch, int stopFd)
    : databaseFile_(std::move(databaseFile)),
      onWake_(std::move(onWake)),
      owner_(::getpid()),
      inotifyFd_(inotifyFd),
      watch_(watch),
      stopFd_(stopFd) {}

WakeWatcher::~WakeWatcher() {
  if (thread_ != nullptr) {
    if (ownedByThisProcess()) {
      const std::uint64_t one = 1;
      // An eventfd write of 1 cannot fail short of overflowing the counter.
      (void)::write(stopFd_, &one, sizeof one);
      thread_->join();
      delete thread_;
    }
    // In a forked child there is no thread: the handle is leaked on purpose.
  }
  ::close(inotifyFd_);
  ::close(stopFd_);
}

bool WakeWatcher::ownedByThisProcess() const { return ::getpid() == owner_; }

bool WakeWatcher::rewatch() {
  if (watch_ >= 0) (void)::inotify_rm_watch(inotifyFd_, watch_);
  watch_ = -1;
  if (!ensureWakeFile(databaseFile_)) return false;
  watch_ = ::inotify_add_watch(inotifyFd_, wakeFilePath(databaseFile_).c_str(),
                               kWatchMask);
  return watch_ >= 0;
}

void WakeWatcher::run() {
  alignas(struct inotify_event) char buffer[4096];
  for (;;) {
    pollfd fds[2] = {{inotifyFd_, POLLIN, 0}, {stopFd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot wait any more: waiters poll
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    bool wake = false;
    bool lost = false;
    // Drain the queue: one onWake for the whole batch.
    for (;;) {
      const ssize_t n = ::read(inotifyFd_, buffer, sizeof buffer);
      if (n <= 0) break;  // EAGAIN: drained
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        wake = true;
        // The watched file was deleted or renamed (or its watch dropped):
        // watch the path again. Only for the current watch: removing the old
        // one queues an IN_IGNORED for it, which must not start another
        // round. (A queue overflow lost events: `wake` covers it.)
        if (event->wd == watch_ &&
            (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
          lost = true;
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    if (lost && !rewatch()) {
      try {
        onWake_();
      } catch (...) {
      }
      return;  // nothing left to watch: waiters poll
    }
    if (wake) {
      try {
        onWake_();
      } catch (...) {
        // A listener's failure must not end the watching.
      }
    }
  }
}

#else  // not Linux: no inotify, waiters poll.

std::unique_ptr<WakeWatcher> WakeWatcher::start(const std::string&,
                                                std::function<void()>) {
  return nullptr;
}

WakeWatcher::~WakeWatcher() = default;

bool WakeWatcher::ownedByThisProcess() const { return true; }

#endif

}  // namespace dlm::internal::sqlite
