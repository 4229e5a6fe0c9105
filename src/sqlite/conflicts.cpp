// Conflict checks of the SQLite store: each is one statement of primary-key
// lookups and range scans (the key, each ancestor through a join with the
// JSON array, the descendant range), tagged with the group the blocking key
// falls in; sorted here so that the order is the key, the ancestors root
// first (an ancestor is a prefix of the next one, so key order is root
// first), the descendants in key order.
#include "sqlite/conflicts.h"

#include <algorithm>
#include <tuple>

#include "sqlite/cycle_sql.h"

namespace dlm::internal::sqlite {

std::string ancestorsJson(Connection& c, const std::vector<std::string>& keys) {
  std::string json = "[]";
  for (const auto& key : keys) {
    Statement append = c.statement(sql::kJsonAppend);
    append.bind(1, json).bind(2, key);
    if (!append.step()) c.fail(SQLITE_INTERNAL, "building the ancestors list");
    json = append.text(0);
  }
  return json;
}

std::string_view modeText(LockMode mode) { return lockModeName(mode); }

LockMode modeFromText(std::string_view text) {
  // The column's CHECK allows only these two; NULL (read as "") cannot occur.
  return text == "SHARED" ? LockMode::SHARED : LockMode::EXCLUSIVE;
}

namespace {

// Binds ?1..?6 the way both statements below use them.
void bindPath(Statement& s, const PathKey& path, LockMode mode,
              std::int64_t now) {
  s.bind(1, path.key).bind(2, now).bind(3, path.ancestors);
  s.bind(4, path.descendantsBegin).bind(5, path.descendantsEnd);
  // 1 when the wanted mode is EXCLUSIVE: then SHARED holds and SHARED
  // requests are in its way too.
  s.bind(6, static_cast<std::int64_t>(mode == LockMode::EXCLUSIVE ? 1 : 0));
}

}  // namespace

namespace {

// A row of either statement: its group (0 the key, 1 an ancestor, 2 a
// descendant), key, owner and rank within the key (fencing token of a hold,
// time of a request).
struct Found {
  std::int64_t group;
  std::string key;
  std::string owner;
  std::int64_t rank;
};

// The rows of `rows` in group, key, rank, owner order (key order is byte
// order, as SQLite's BINARY collation), at most `limit` of them (all when
// negative, as SQL's LIMIT).
std::vector<Conflict> sorted(Statement& rows, std::int64_t limit) {
  std::vector<Found> found;
  while (rows.step()) {
    found.push_back(
        Found{rows.integer(0), rows.text(1), rows.text(2), rows.integer(3)});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return std::tie(a.group, a.key, a.rank, a.owner) <
           std::tie(b.group, b.key, b.rank, b.owner);
  });
  if (limit >= 0 && found.size() > static_cast<std::uint64_t>(limit)) {
    found.resize(static_cast<std::size_t>(limit));
  }
  std::vector<Conflict> out;
  out.reserve(found.size());
  for (auto& f : found) {
    out.push_back(Conflict{std::move(f.owner), std::move(f.key)});
  }
  return out;
}

}  // namespace

std::vector<Conflict> conflictingHolds(Connection& c, const PathKey& path,
                                       LockMode mode, std::int64_t now,
                                       std::int64_t limit) {
  Statement rows = c.statement(sql::kConflictingHolds);
  bindPath(rows, path, mode, now);
  return sorted(rows, limit);
}

std::vector<Conflict> olderConflictingRequests(
    Connection& c, const PathKey& path, LockMode mode, std::string_view owner,
    const std::optional<QueuePlace>& place, std::int64_t now,
    std::int64_t limit) {
  Statement rows = c.statement(sql::kOlderConflictingRequests);
  bindPath(rows, path, mode, now);
  rows.bind(7, owner);
  if (place) {
    rows.bind(8, place->requestedAt).bind(9, place->owner);
  } else {
    rows.bindNull(8).bindNull(9);
  }
  return sorted(rows, limit);
}

std::optional<QueuePlace> requestPlace(Connection& c, std::string_view key,
                                       std::string_view owner,
                                       std::int64_t now) {
  Statement row = c.statement(sql::kRequestPlace);
  row.bind(1, key).bind(2, owner).bind(3, now);
  if (!row.step()) return std::nullopt;
  return QueuePlace{row.integer(0), std::string(owner)};
}

}  // namespace dlm::internal::sqlite
