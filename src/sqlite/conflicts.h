// Which live holds and which live requests conflict with a lock request, on
// the SQLite tables: the checks tryAcquire and the wait-for graph share.
// Two locks conflict when their keys lie on one path (equal, or one an
// ancestor of the other) and at least one of them is EXCLUSIVE
// (dlm/lock_mode.h). Callers run these inside their BEGIN IMMEDIATE
// transaction, so the answers cannot change before they act on them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/lock_mode.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// A key with the keys that lie on its path, as a request row stores them.
struct PathKey {
  std::string key;
  // The ancestors' scoped keys, root first, as a JSON array of strings.
  std::string ancestors;
  // Descendants are the keys k with descendantsBegin <= k < descendantsEnd;
  // both empty when hierarchy is off (an empty range).
  std::string descendantsBegin;
  std::string descendantsEnd;
};

// The ancestors as a JSON array built by SQLite itself, so that json_each
// reads back exactly the same strings.
std::string ancestorsJson(Connection& c, const std::vector<std::string>& keys);

// "EXCLUSIVE" / "SHARED" as the tables store them, and back.
std::string_view modeText(LockMode mode);
LockMode modeFromText(std::string_view text);

// A live hold, or the owner of a live request, in someone's way.
struct Conflict {
  std::string owner;
  // The key held or waited for.
  std::string key;
};

// Owners of live holds (unexpired at `now`: EXCLUSIVE rows with status HELD,
// SHARED hold rows) that conflict with `mode` on `path`: on the key first,
// then the ancestors root first, then the descendants in key order. At most
// `limit` of them.
std::vector<Conflict> conflictingHolds(Connection& c, const PathKey& path,
                                       LockMode mode, std::int64_t now,
                                       std::int64_t limit);

// A request's place in the queue: its recording time, ties by owner.
struct QueuePlace {
  std::int64_t requestedAt = 0;
  std::string owner;
};

// Live requests (unexpired at `now`) of owners other than `owner` that
// conflict with `mode` on `path` and come before `place` (all of them when
// `place` is nullopt), in the same key order as conflictingHolds, then
// oldest first. At most `limit` of them.
std::vector<Conflict> olderConflictingRequests(
    Connection& c, const PathKey& path, LockMode mode, std::string_view owner,
    const std::optional<QueuePlace>& place, std::int64_t now,
    std::int64_t limit);

// `owner`'s live request for exactly `key`, if any: its place in the queue.
std::optional<QueuePlace> requestPlace(Connection& c, std::string_view key,
                                       std::string_view owner,
                                       std::int64_t now);

}  // namespace dlm::internal::sqlite
