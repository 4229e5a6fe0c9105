#include "sqlite/file_identity.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "dlm/error.h"

namespace dlm::internal::sqlite {

namespace {

std::uint32_t bigEndian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
         (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

// Whether `file`, now `size` bytes and smaller than before, is what SQLite
// leaves when a checkpoint after VACUUM (or auto_vacuum) cuts the file to the
// database's new length: a header (https://sqlite.org/fileformat.html) whose
// page count, valid (change counter = version-valid-for), times the page
// size is the size. A truncated file has no header, or one that counts the
// pages it had. Read only when the file shrank, which is rare.
bool shrunkBySqlite(const std::string& file, long long size) {
  if (size < 100) return false;
  unsigned char header[100];
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof header) ||
      std::memcmp(header, "SQLite format 3", 16) != 0) {
    return false;
  }
  long long pageSize = (header[16] << 8) | header[17];
  if (pageSize == 1) pageSize = 65536;
  const std::uint32_t pages = bigEndian32(header + 28);
  return bigEndian32(header + 24) == bigEndian32(header + 92) && pages > 0 &&
         static_cast<long long>(pages) * pageSize == size;
}

// The marker: when the file got dlm's tables. No row (a DBA deleted it)
// reads as "", which is a marker too.
std::string readMarker(Connection& c) {
  Statement row = c.statement(
      "SELECT applied_at FROM dlm_schema_version WHERE version = 1");
  return row.step() ? row.text(0) : std::string();
}

}  // namespace

void FileIdentity::opened(std::string file) {
  file_ = std::move(file);
  last_ = file_.empty() ? std::nullopt : fileStateOf(file_);
  marker_.reset();
  lost_.reset();
}

void FileIdentity::forget() { opened(std::string()); }

std::optional<std::string> FileIdentity::beforeCall(Connection& c) {
  if (!last_) return std::nullopt;  // in-memory, or gone at open
  const std::optional<FileState> now = fileStateOf(file_);
  if (!now) return std::string("the file is gone");
  if (now->id != last_->id) return std::string("another file in its place");
  if (now->size < last_->size && !shrunkBySqlite(file_, now->size)) {
    return fmt::format("truncated in place to {} bytes from {}", now->size,
                       last_->size);
  }
  if (now->changedNs != last_->changedNs || now->size != last_->size) {
    c.dropPageCache();
  }
  last_ = now;
  return std::nullopt;
}

void FileIdentity::checkMarker(Connection& c) {
  if (!last_) return;
  if (!marker_) {
    // Learnt once the file has dlm's tables: initialize may be about to
    // make them in this very transaction.
    Statement exists = c.statement(
        "SELECT count(*) FROM sqlite_master "
        "WHERE type = 'table' AND name = 'dlm_schema_version'");
    if (!exists.step() || exists.integer(0) == 0) return;
    marker_ = readMarker(c);
    return;
  }
  std::string now;
  try {
    now = readMarker(c);
  } catch (const DLMException& e) {
    if (e.transient()) throw;  // an I/O error that may pass
    // No dlm tables any more ("no such table"), or not a database.
    lost_ = fmt::format("its dlm tables are gone: {}", e.what());
    throw DLMException(ErrorCode::CONNECTION_ERROR, *lost_);
  }
  if (now != *marker_) {
    lost_ = fmt::format(
        "rewritten in place: its dlm tables were made at {}, not at {}",
        now.empty() ? "an unrecorded time" : now, *marker_);
    throw DLMException(ErrorCode::CONNECTION_ERROR, *lost_);
  }
}

}  // namespace dlm::internal::sqlite
