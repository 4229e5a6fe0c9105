// Whether the store's database file is still the one its connection opened.
// SQLite itself notices none of this: a connection goes on in an unlinked
// file, and in WAL mode it serves a file truncated or rewritten in place
// from its page cache and the WAL until the pages it needs are gone. A store
// that went on would renew locks nobody else sees and hand fencing tokens
// out again from whatever rows the file has now.
//
// What counts as another file:
// - deleted, renamed, or replaced by another inode (stat, every call);
// - truncated in place (`: > file`): the size went down, and not to what a
//   checkpoint leaves after VACUUM or auto_vacuum (a SQLite header whose
//   page count times page size is the size) (stat, every call);
// - rewritten in place with other bytes (`cat other > file`): the marker,
//   the creation time of the file's dlm tables (dlm_schema_version's row
//   for version 1, to the millisecond; nothing rewrites it), is not the one
//   read before (one primary-key read in every write transaction; after the
//   file was written outside this connection, read past its page cache).
// A copy of the same file made earlier and put back in place (a backup
// restored under a running process) keeps the marker and is not noticed;
// docs/stores.md tells operators never to do that.
//
// Not thread-safe: the store calls it under its connection mutex.
#pragma once

#include <optional>
#include <string>

#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

class FileIdentity {
 public:
  // The connection just opened `file` (its canonical name; empty for an
  // in-memory or temporary database, which nothing else can touch).
  void opened(std::string file);
  // The connection was closed.
  void forget();

  // Before each call, with `c` outside a transaction: why the file is no
  // longer the one opened (deleted, replaced, truncated), or nullopt. When
  // the file was written since the last call (a checkpoint, ours or another
  // connection's, or someone else), drops c's page cache, so that the next
  // transaction's marker check reads what the file holds now.
  std::optional<std::string> beforeCall(Connection& c);

  // In every write transaction, right after BEGIN IMMEDIATE: learns the
  // marker the first time the file has dlm's tables, then compares. Throws
  // CONNECTION_ERROR, and lost() says why, when it is another one or gone.
  void checkMarker(Connection& c);

  // Why checkMarker found the file lost, or nullopt.
  const std::optional<std::string>& lost() const { return lost_; }

 private:
  std::string file_;
  std::optional<FileState> last_;
  std::optional<std::string> marker_;
  std::optional<std::string> lost_;
};

}  // namespace dlm::internal::sqlite
