// The in-process delivery of released keys between SqliteStore objects.
//
// SQLite has no LISTEN/NOTIFY: a process cannot hear another's commits. What
// it can do is tell every store object in this process that uses the same
// database file, so a waiter woken by a release on another SqliteStore (a
// second manager on the file, a dlmctl in the same process, ...) tries again
// at once. Waiters in other processes are reached through the file's wake
// file (sqlite/release_wake_file.h): a channel of a file with a subscription that
// asked for it has one watcher thread, started by the first such subscribe
// and stopped when the channel's last subscription ends; what it hears is
// delivered to the channel's listeners as missedReleases() (the signal names
// no key). Without a watcher, waiters poll (sleepBetweenRetries).
//
// Channels are named by the database file's canonical path; a store on
// ":memory:" gets a channel of its own (no other connection sees its data).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlm/lock_store.h"
#include "sqlite/release_wake_file.h"

namespace dlm::internal::sqlite {

class SqliteReleaseChannel {
 public:
  // The process-wide bus. Stores keep the pointer, so the bus outlives every
  // store even when one is destroyed during static destruction.
  static std::shared_ptr<SqliteReleaseChannel> shared();

  // A channel name no file can have, for one ":memory:" store.
  static std::string privateChannel();

  SqliteReleaseChannel() = default;
  SqliteReleaseChannel(const SqliteReleaseChannel&) = delete;
  SqliteReleaseChannel& operator=(const SqliteReleaseChannel&) = delete;

  // Delivers the keys published on `channel` to `listener` from now on, as
  // a subscription of `subscriber` (one store object; the same listener may
  // be subscribed through several). Subscribing again is a no-op. With
  // `watchOtherProcesses` and a file channel, also starts the channel's wake
  // watcher if it has none (or only one inherited through fork): releases
  // by other processes after this returns reach `listener` as
  // missedReleases(). A watcher that cannot start is not an error (polling).
  void subscribe(const std::string& channel, const void* subscriber,
                 ReleaseListener* listener, bool watchOtherProcesses = false);

  // Ends that subscription. When this returns, no call to `listener` made
  // for it is running (it waits for a delivery in progress) or will be made.
  // Must not be called from inside a listener callback (it would wait for
  // itself).
  void unsubscribe(const std::string& channel, const void* subscriber,
                   ReleaseListener* listener);

  // Ends every subscription of `subscriber` (a store object going away).
  void unsubscribeAll(const std::string& channel, const void* subscriber);

  // Calls released(key) on every listener subscribed to `channel`, on the
  // calling thread, with the channel's mutex held. Callers hold no store
  // mutex (a delivery may wait for another delivery to finish).
  void publish(const std::string& channel, std::string_view key);

 private:
  struct Channel {
    // Held while delivering and while changing `listeners`, which is what
    // makes unsubscribe wait for a delivery in progress.
    std::mutex mutex;
    std::vector<std::pair<const void*, ReleaseListener*>> listeners;
    // Other processes' releases (null: none, or it could not start).
    // Changed under both the registry's mutex and this channel's.
    std::unique_ptr<WakeWatcher> watcher;
  };

  // The watcher's delivery: missedReleases() on every listener of `channel`.
  static void deliverMissed(Channel& channel);

  // Removes the subscriptions `match` selects; drops the channel when none
  // is left.
  void remove(const std::string& channel,
              const std::function<bool(
                  const std::pair<const void*, ReleaseListener*>&)>& match);

  // Guards `channels_` only; always taken before a channel's mutex.
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Channel>, std::less<>> channels_;
};

}  // namespace dlm::internal::sqlite
