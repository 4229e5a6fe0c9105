#include "sqlite/sqlite_release_channel.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

namespace dlm::internal::sqlite {

std::shared_ptr<SqliteReleaseChannel> SqliteReleaseChannel::shared() {
  static const std::shared_ptr<SqliteReleaseChannel> bus = std::make_shared<SqliteReleaseChannel>();
  return bus;
}

std::string SqliteReleaseChannel::privateChannel() {
  // Canonical file paths start with '/', so this names no file.
  static std::atomic<std::uint64_t> next{0};
  return ":memory:#" + std::to_string(++next);
}

void SqliteReleaseChannel::subscribe(const std::string& channel, const void* subscriber,
                           ReleaseListener* listener,
                           bool watchOtherProcesses) {
  std::lock_guard<std::mutex> registry(mutex_);
  auto& slot = channels_[channel];
  if (!slot) slot = std::make_shared<Channel>();
  std::lock_guard<std::mutex> guard(slot->mutex);
  const std::pair<const void*, ReleaseListener*> entry{subscriber, listener};
  if (std::find(slot->listeners.begin(), slot->listeners.end(), entry) ==
      slot->listeners.end()) {
    slot->listeners.push_back(entry);
  }
  // File channels are canonical paths; private (":memory:") ones are not.
  const bool file = !channel.empty() && channel.front() == '/';
  if (watchOtherProcesses && file &&
      (!slot->watcher || !slot->watcher->ownedByThisProcess())) {
    // A watcher inherited through fork has no thread in this process: its
    // destructor only closes its descriptors.
    slot->watcher.reset();
    // Started with both mutexes held, so the watch is in place before this
    // subscribe returns; its thread takes the channel's mutex only to
    // deliver. The Channel outlives the watcher (remove() stops it before
    // dropping its own reference).
    Channel* target = slot.get();
    slot->watcher =
        WakeWatcher::start(channel, [target] { deliverMissed(*target); });
  }
}

void SqliteReleaseChannel::deliverMissed(Channel& channel) {
  std::lock_guard<std::mutex> guard(channel.mutex);
  for (const auto& [subscriber, listener] : channel.listeners) {
    (void)subscriber;
    try {
      listener->missedReleases();
    } catch (...) {
      // As in publish: one listener's failure must not silence the others.
    }
  }
}

void SqliteReleaseChannel::unsubscribe(const std::string& channel, const void* subscriber,
                             ReleaseListener* listener) {
  remove(channel, [&](const auto& entry) {
    return entry.first == subscriber && entry.second == listener;
  });
}

void SqliteReleaseChannel::unsubscribeAll(const std::string& channel,
                                const void* subscriber) {
  remove(channel, [&](const auto& entry) { return entry.first == subscriber; });
}

void SqliteReleaseChannel::remove(
    const std::string& channel,
    const std::function<bool(const std::pair<const void*, ReleaseListener*>&)>&
        match) {
  // A reference of our own: erasing the map entry below must not destroy
  // the mutex we hold, nor the Channel its watcher's thread delivers to
  // while that thread is being stopped.
  std::shared_ptr<Channel> target;
  std::unique_ptr<WakeWatcher> stopping;
  {
    std::lock_guard<std::mutex> registry(mutex_);
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    target = it->second;
    // Taking the channel's mutex waits for a delivery in progress, so none
    // is running once this returns.
    std::lock_guard<std::mutex> guard(target->mutex);
    auto& listeners = target->listeners;
    listeners.erase(std::remove_if(listeners.begin(), listeners.end(), match),
                    listeners.end());
    if (listeners.empty()) {
      stopping = std::move(target->watcher);
      channels_.erase(it);
    }
  }
  // Stopped without the mutexes: its thread may be waiting for the
  // channel's mutex to deliver (to nobody now) before it sees the stop.
  stopping.reset();
}

void SqliteReleaseChannel::publish(const std::string& channel, std::string_view key) {
  std::shared_ptr<Channel> target;
  {
    // The registry's mutex only for the lookup: deliveries on different
    // files do not wait for each other.
    std::lock_guard<std::mutex> registry(mutex_);
    const auto it = channels_.find(channel);
    if (it == channels_.end()) return;
    target = it->second;
  }
  std::lock_guard<std::mutex> guard(target->mutex);
  for (const auto& [subscriber, listener] : target->listeners) {
    (void)subscriber;
    try {
      listener->released(key);
    } catch (...) {
      // The release has committed; a listener's failure must neither undo
      // the report of it nor keep the other listeners from hearing it.
    }
  }
}

}  // namespace dlm::internal::sqlite
