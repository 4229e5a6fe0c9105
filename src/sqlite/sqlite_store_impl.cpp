#include "sqlite/sqlite_store_impl.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "sqlite/release_wake_file.h"
#include "sqlite/sqlite_schema_setup.h"

namespace dlm {

using internal::sqlite::Connection;
using internal::sqlite::SqliteReleaseChannel;
using internal::sqlite::Statement;

SqliteStore::Impl::Impl(SqliteStoreOptions options)
    : options_(std::move(options)),
      bus_(SqliteReleaseChannel::shared()),
      mutex_(options_.path, options_.busyTimeout) {}

SqliteStore::Impl::~Impl() {
  // Listeners left subscribed (the owner forgot to unsubscribe) must not
  // be called after the store is gone.
  const std::string channel = knownChannel();
  if (!channel.empty()) bus_->unsubscribeAll(channel, this);
}

Connection& SqliteStore::Impl::openedConnection(std::string_view what,
                                                Deadline callLimit) {
  if (connection_) {
    if (auto why = identity_.beforeCall(*connection_)) loseFile(what, *why);
  }
  if (!connection_) {
    // Not kept when opening fails, so the next call tries again.
    // After its file was lost, never a new one in its place (not even
    // through initialize(true)): that file would hand fencing tokens out
    // from 1 again. Someone who means it makes the file (dlmctl migrate).
    connection_ = std::make_unique<Connection>(
        options_.path, options_.busyTimeout, callLimit,
        fileLost_ ? internal::sqlite::OpenMode::kReadWriteExisting
                  : internal::sqlite::OpenMode::kReadWrite);
    identity_.opened(internal::sqlite::canonicalFile(connection_->handle()));
    connection_->onBegin([this](Connection& c) { identity_.checkMarker(c); });
    std::lock_guard<std::mutex> channelGuard(channelMutex_);
    if (channel_.empty()) {
      // Named once, by the first connection: every store object on the
      // same file gets the same name, however its path was spelled.
      const std::string file =
          internal::sqlite::canonicalFile(connection_->handle());
      channel_ = file.empty() ? SqliteReleaseChannel::privateChannel() : file;
      // File channels are canonical paths; ":memory:" ones have no file.
      if (channel_.front() == '/') {
        wakePath_ = internal::sqlite::wakeFilePath(channel_);
      }
      channelSet_.store(true, std::memory_order_release);
    }
  }
  return *connection_;
}

SchemaState SqliteStore::Impl::schemaState() {
  throwIfClosed();
  const std::string& path = options_.path;
  // In-memory and temporary databases exist only in this store's own
  // connection (and write nothing to disk): look there.
  if (path.empty() || path == ":memory:") {
    return withConnection("reading the schema version",
                          internal::sqlite::readSchemaState);
  }
  // No file, no schema. The store's connection would create the file (and
  // switch it to WAL), so look through a query-only connection of this
  // call's own instead, which never creates the file either.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return SchemaState{};
  }
  const Deadline callLimit =
      currentDeadline() ? Deadline::max() : deadlineAfter(options_.busyTimeout);
  Connection queryOnly(path, options_.busyTimeout, callLimit,
                       internal::sqlite::OpenMode::kQueryOnly);
  return internal::sqlite::readSchemaState(queryOnly);
}

bool SqliteStore::Impl::fileMissing() const {
  const std::string& path = options_.path;
  if (path.empty() || path == ":memory:") return false;
  std::error_code error;
  return std::filesystem::status(path, error).type() ==
         std::filesystem::file_type::not_found;
}

void SqliteStore::Impl::removeFileIfStillEmpty() {
  {
    const auto guard = mutex_.lockForClose();
    connection_.reset();
    identity_.forget();
  }
  std::error_code error;
  const auto size = std::filesystem::file_size(options_.path, error);
  if (error) return;
  // An empty file is one SQLite never wrote to (it writes the header with
  // the first table); else look.
  if (size != 0) {
    try {
      Connection queryOnly(options_.path, options_.busyTimeout,
                           deadlineAfter(options_.busyTimeout),
                           internal::sqlite::OpenMode::kQueryOnly);
      Statement tables =
          queryOnly.statement("SELECT count(*) FROM sqlite_master");
      if (!tables.step() || tables.integer(0) != 0) return;
    } catch (const DLMException&) {
      return;  // cannot tell: keep it
    }
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ignored;
    std::filesystem::remove(options_.path + suffix, ignored);
  }
}

void SqliteStore::Impl::close() {
  // Set first: calls arriving meanwhile are refused at once instead of
  // queueing behind the call in progress.
  closed_ = true;
  {
    const auto guard = mutex_.lockForClose();
    connection_.reset();
  }
  // Listeners hear nothing more from a closed store; with the file's last
  // subscription this stops its wake watcher thread.
  const std::string channel = knownChannel();
  if (!channel.empty()) bus_->unsubscribeAll(channel, this);
}

std::string SqliteStore::Impl::channel() {
  std::string known = knownChannel();
  if (!known.empty()) return known;
  withConnection("opening the connection", [](Connection&) { return 0; });
  return knownChannel();
}

std::string SqliteStore::Impl::knownChannel() {
  if (channelSet_.load(std::memory_order_acquire)) return channel_;
  std::lock_guard<std::mutex> guard(channelMutex_);
  return channel_;
}

void SqliteStore::Impl::announce(std::string_view key) {
  if (!channelSet_.load(std::memory_order_acquire)) return;
  if (options_.wakeOtherProcesses && !wakePath_.empty()) {
    internal::sqlite::signalWakeFile(wakePath_);
  }
  bus_->publish(channel_, key);
}

void SqliteStore::Impl::announceAll(const std::vector<std::string>& keys) {
  if (keys.empty() || !channelSet_.load(std::memory_order_acquire)) return;
  if (options_.wakeOtherProcesses && !wakePath_.empty()) {
    internal::sqlite::signalWakeFile(wakePath_);
  }
  for (const std::string& key : keys) bus_->publish(channel_, key);
}

void SqliteStore::Impl::throwIfClosed() const {
  if (closed_) {
    throw DLMException(
        ErrorCode::INTERNAL_ERROR,
        fmt::format("sqlite store '{}': store closed", options_.path));
  }
}

void SqliteStore::Impl::loseFile(std::string_view what, std::string why) {
  connection_.reset();
  identity_.forget();
  fileLost_ = true;
  tokenFloor_ = highestToken_;
  throw DLMException(
      ErrorCode::CONNECTION_ERROR,
      fmt::format("sqlite store '{}': {}: the database file was deleted "
                  "or replaced while in use ({}); locks held through it "
                  "are lost",
                  options_.path, what, why));
}

}  // namespace dlm
