// Cross-process release wake-up for SQLite files: a wake file beside the
// database, written by every release and watched with inotify.
//
// Why this mechanism: SQLite has no LISTEN/NOTIFY, and a waiter in another
// process otherwise sleeps out sleepBetweenRetries. The alternatives were a
// process-shared futex or semaphore in a small mmapped file. A futex word in a
// shared mapping needs every waiter blocked on it and a store-side counter
// protocol to avoid lost wake-ups, and a crashed process can leave a POSIX
// semaphore in an odd state; inotify needs neither: the kernel queues an
// event for every write, so a watch set up before a waiter's next attempt
// cannot miss a release after it, and nothing is left behind by a process
// that dies. It is also what one thread per process per file can wait on
// together with a stop signal (poll on the inotify fd and an eventfd).
//
// The file: "<canonical database path>-dlmwake", like SQLite's own "-wal" and
// "-shm". Its contents mean nothing (8 bytes at offset 0, rewritten in place,
// so it never grows); only the write's inotify event counts. The signal
// carries no key: a watcher reports "something on this file was released"
// and every waiter of the process on the file tries again
// (ReleaseListener::missedReleases). Passing keys would need a shared ring
// with its own concurrency and overflow rules, for saving a few attempts.
//
// Who creates it: only a watcher (started by subscribeReleases, i.e. by a
// manager that is about to wait, whose store connection has already opened
// the database read-write). A release only opens an existing file for
// writing and never creates it: no watcher anywhere means no file is needed.
// Read-only commands (schemaState, dlmctl list, describe...) neither
// subscribe nor release, so they never create it. It is created with the
// database file's permission bits (like SQLite's "-wal"/"-shm": applied with
// fchmod, so the umask does not narrow them) and, when the creator runs as
// root, the database file's owner and group: whoever may write the database
// may signal, and nobody else can.
//
// Failures never fail a release and never fail a subscription: a wake file
// that cannot be created, opened, written or watched (read-only directory, a
// directory or other non-regular file in its place, inotify limits, a
// non-Linux system) just leaves the waiters of other processes to poll, as
// before. inotify sees only writes made through this host's kernel: on a
// network file system, writers on other hosts are not heard (SQLite's WAL
// mode does not support that case anyway).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace dlm::internal::sqlite {

// "<databaseFile>-dlmwake".
std::string wakeFilePath(const std::string& databaseFile);

// Tells the watchers of `databaseFile` in every process that a lock on it was
// freed: one open (without O_CREAT), an 8-byte pwrite and a close of the wake
// file. Never creates the file, never throws, never waits for a lock; does
// nothing when the file is missing or cannot be written.
void signalWake(const std::string& databaseFile) noexcept;
// The same, given the wake file's name (wakeFilePath) already.
void signalWakeFile(const std::string& wakePath) noexcept;

// One thread watching one database file's wake file, calling `onWake` after
// each batch of writes to it (from this process too), and after the database
// file itself is unlinked, renamed or replaced. Destroying it stops the
// thread and waits for it, so `onWake` is not running and will not be called
// once the destructor returns; it must not be destroyed from inside `onWake`.
//
// Fork: a child process inherits the object but not its thread. The object
// remembers the process that started it (ownedByThisProcess); destroyed in
// another process, it closes its descriptors and deliberately leaks the
// thread handle (there is no thread to join, and std::thread would terminate
// if destroyed joinable). SqliteReleaseChannel replaces such an inherited
// watcher with a fresh one on the child's next subscribe.
class WakeWatcher {
 public:
  // Creates the wake file if missing (see above), sets up the inotify watch
  // and starts the thread. The watch is in place when this returns: every
  // write after it is reported. nullptr when any step fails (the caller then
  // relies on polling); never throws.
  static std::unique_ptr<WakeWatcher> start(const std::string& databaseFile,
                                            std::function<void()> onWake);

  ~WakeWatcher();
  WakeWatcher(const WakeWatcher&) = delete;
  WakeWatcher& operator=(const WakeWatcher&) = delete;

  // False in a forked child of the process that started it.
  bool ownedByThisProcess() const;

 private:
  WakeWatcher(std::string databaseFile, std::function<void()> onWake,
              int inotifyFd, int watch, int stopFd);
  void run();
  // Re-creates and re-watches the file after it was deleted or moved; false
  // when that fails (the thread then ends and waiters poll).
  bool rewatch();

  const std::string databaseFile_;
  const std::function<void()> onWake_;
  const pid_t owner_;
  int inotifyFd_;
  int watch_;
  int stopFd_;
  // Heap-allocated so that a forked child can abandon it (see above).
  std::thread* thread_ = nullptr;
};

}  // namespace dlm::internal::sqlite
