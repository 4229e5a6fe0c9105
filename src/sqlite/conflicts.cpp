// Conflict checks of the SQLite store: each is one statement of primary-key
// lookups and range scans (the key, each ancestor through IN over the JSON
// array, the descendant range), tagged with the group the blocking key falls
// in so that the order is the key, the ancestors root first (an ancestor is
// a prefix of the next one, so key order is root first), the descendants in
// key order.
#include "sqlite/conflicts.h"

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

std::vector<Conflict> conflictingHolds(Connection& c, const PathKey& path,
                                       LockMode mode, std::int64_t now,
                                       std::int64_t limit) {
  Statement rows = c.statement(sql::kConflictingHolds);
  bindPath(rows, path, mode, now);
  rows.bind(7, limit);
  std::vector<Conflict> out;
  while (rows.step()) out.push_back(Conflict{rows.text(1), rows.text(0)});
  return out;
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
  rows.bind(10, limit);
  std::vector<Conflict> out;
  while (rows.step()) out.push_back(Conflict{rows.text(1), rows.text(0)});
  return out;
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
