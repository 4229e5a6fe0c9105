// The wait-for graph on the SQLite tables. Nodes are owners; an owner's
// edges go out from each of its live request rows, to the owners of what is
// in that request's way: live holds that conflict with it (its own holds
// included: holding SHARED `a` and asking EXCLUSIVE `a` is a cycle of one)
// and older live requests of other owners that conflict with it (fair
// queueing makes it wait for them). A request of another owner that its own
// owner's hold blocks is not followed: that owner's wait ends at once. The walk runs inside the registration's
// write transaction, so no registration can change the graph meanwhile.
#include "sqlite/sqlite_wait_graph.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sqlite/conflicts.h"
#include "sqlite/sqlite_limits.h"
#include "sqlite/store_time.h"

namespace dlm::internal::sqlite {

namespace {

constexpr std::int64_t kAll = std::numeric_limits<std::int64_t>::max();

// A waiter's deadline further away than this is recorded as none (a wait
// without end, as far as anyone reading the listing can tell): 100 years.
constexpr std::chrono::milliseconds kLongestRecordedWait{3153600000000};

// A request as the walk sees it: what it waits for, how, and its place in
// the queue.
struct Waiting {
  PathKey path;
  LockMode mode = LockMode::EXCLUSIVE;
  QueuePlace place;
};

// The owners `w` waits for, with repeats.
std::vector<std::string> waitedForOwners(Connection& c, const Waiting& w,
                                         std::int64_t now) {
  std::vector<std::string> owners;
  for (auto& h : conflictingHolds(c, w.path, w.mode, now, kAll)) {
    owners.push_back(std::move(h.owner));
  }
  for (auto& r : olderConflictingRequests(c, w.path, w.mode, w.place.owner,
                                          w.place, now, kAll)) {
    owners.push_back(std::move(r.owner));
  }
  return owners;
}

// `owner`'s live requests (expired ones were deleted by this transaction).
// Read completely before the caller runs other statements on them.
std::vector<Waiting> requestsOf(Connection& c, const std::string& owner,
                                std::int64_t now) {
  Statement rows = c.statement(
      "SELECT resource, ancestors, descendants_begin, descendants_end, mode, "
      "requested_at_ms FROM dlm_lock_requests "
      "WHERE owner_id = ?1 AND expires_at_ms > ?2");
  rows.bind(1, owner).bind(2, now);
  std::vector<Waiting> out;
  while (rows.step()) {
    // NULL descendant bounds (hierarchy off) read as "": an empty range.
    out.push_back(Waiting{
        PathKey{rows.text(0), rows.text(1), rows.text(2), rows.text(3)},
        modeFromText(rows.text(4)), QueuePlace{rows.integer(5), owner}});
  }
  return out;
}

// Breadth-first over owners from the request `start` of `me`: the waited-for
// keys along the shortest path that leads back to `me`, or empty. The same
// walk as the in-memory reference (tests/support/fake_store.cpp).
std::vector<std::string> findCycle(Connection& c, const Waiting& start,
                                   const std::string& me, std::int64_t now) {
  struct Step {
    std::string owner;
    std::vector<std::string> path;  // the waited-for keys that led here
  };
  std::set<std::string> expanded;
  std::vector<Step> frontier;
  for (auto& owner : waitedForOwners(c, start, now)) {
    frontier.push_back(Step{std::move(owner), {start.path.key}});
  }
  while (!frontier.empty()) {
    std::vector<Step> next;
    for (auto& step : frontier) {
      if (step.owner == me) return step.path;
      if (!expanded.insert(step.owner).second) continue;
      for (const auto& waiting : requestsOf(c, step.owner, now)) {
        auto owners = waitedForOwners(c, waiting, now);
        // Blocked by its own owner's hold: a cycle of one, which ends that
        // owner's wait at once (told, or its leftover released); no one
        // else waits on it for ever.
        if (std::find(owners.begin(), owners.end(), step.owner) !=
            owners.end()) {
          continue;
        }
        for (auto& owner : owners) {
          if (owner != me && expanded.count(owner) != 0) continue;
          auto path = step.path;
          path.push_back(waiting.path.key);
          next.push_back(Step{std::move(owner), std::move(path)});
        }
      }
    }
    frontier = std::move(next);
  }
  return {};
}

}  // namespace

WaitRegistration registerWaitIn(Connection& c, const WaitRequest& request) {
  // BEGIN IMMEDIATE: the file's write lock serialises this walk with every
  // other registration (threads and processes), so two owners waiting for
  // each other's keys at once cannot both miss the cycle. Lazy: a request
  // row lost on power loss only hides one wait from detection and queueing.
  Transaction tx(c, Durability::kLazy);
  const std::int64_t now = nowMs();
  // Rows of waiters that are past their deadline (crashed, or gone without
  // unregistering) leave the graph.
  c.statement("DELETE FROM dlm_lock_requests WHERE expires_at_ms <= ?1")
      .bind(1, now)
      .run();

  const std::string owner(request.owner);
  // The DBA's cap on live requests per owner (dlm_limits). Renewing the
  // owner's request for this key is not one more request.
  const StoreLimits limits = readLimits(c);
  checkKeyLimits(limits, request.key);
  checkRequestsPerOwnerLimit(
      limits, liveRequestsForOtherKeys(c, owner, request.key.key, now,
                                       limits.maxRequestsPerOwner));
  // A re-registration keeps its place in the queue.
  const std::optional<QueuePlace> earlier =
      requestPlace(c, request.key.key, owner, now);
  const Waiting start{
      PathKey{request.key.key, ancestorsJson(c, request.key.ancestors),
              request.key.descendantsBegin, request.key.descendantsEnd},
      request.mode, earlier ? *earlier : QueuePlace{now, owner}};
  WaitRegistration result;
  result.deadlockCycle = findCycle(c, start, owner, now);
  if (result.deadlockCycle.empty()) {
    // Replaces the owner's earlier row for the key. NULL bounds when
    // hierarchy is off (the schema's documented form).
    Statement insert = c.statement(
        "INSERT OR REPLACE INTO dlm_lock_requests (resource, owner_id, "
        "requested_at_ms, expires_at_ms, ancestors, descendants_begin, "
        "descendants_end, mode, wait_until_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    insert.bind(1, start.path.key)
        .bind(2, owner)
        .bind(3, start.place.requestedAt)
        .bind(4, expiryMs(now, request.maxWait))
        .bind(5, start.path.ancestors)
        .bind(8, modeText(request.mode));
    // The waiter's own deadline (schema 6), for the listings only; none
    // past 100 years, as on PostgreSQL.
    if (request.untilDeadline &&
        *request.untilDeadline <= kLongestRecordedWait) {
      insert.bind(9, now + std::max<std::int64_t>(
                               request.untilDeadline->count(), 0));
    } else {
      insert.bindNull(9);
    }
    if (start.path.descendantsBegin.empty() &&
        start.path.descendantsEnd.empty()) {
      insert.bindNull(6).bindNull(7);
    } else {
      insert.bind(6, start.path.descendantsBegin)
          .bind(7, start.path.descendantsEnd);
    }
    insert.run();
  }
  tx.commit();
  return result;
}

bool unregisterWaitIn(Connection& c, std::string_view key,
                      std::string_view owner) {
  Transaction tx(c, Durability::kLazy);
  const std::int64_t now = nowMs();
  std::optional<Waiting> gone;
  {
    Statement row = c.statement(
        "SELECT ancestors, descendants_begin, descendants_end, mode "
        "FROM dlm_lock_requests WHERE resource = ?1 AND owner_id = ?2");
    row.bind(1, key).bind(2, owner);
    if (row.step()) {
      gone = Waiting{
          PathKey{std::string(key), row.text(0), row.text(1), row.text(2)},
          modeFromText(row.text(3)), QueuePlace{}};
    }
  }
  bool heldBack = false;
  if (gone) {
    c.statement(
         "DELETE FROM dlm_lock_requests WHERE resource = ?1 AND owner_id = ?2")
        .bind(1, key)
        .bind(2, owner)
        .run();
    // Requests that conflict with the one gone: any of them may have been
    // queued behind it (those older than it were not, but waking them
    // costs one look each and saves reading their places).
    heldBack = !olderConflictingRequests(c, gone->path, gone->mode, owner,
                                         std::nullopt, now, 1)
                    .empty();
  }
  tx.commit();
  return heldBack;
}

int cancelRequestsIn(Connection& c, std::string_view key,
                     std::optional<std::string_view> owner) {
  // Lazy like unregisterWait: a cancel lost in a crash leaves the rows to
  // their waiters' deadlines, as before it.
  Transaction tx(c, Durability::kLazy);
  {
    // ?2 NULL: every owner's.
    Statement del = c.statement(
        "DELETE FROM dlm_lock_requests WHERE resource = ?1 "
        "AND (?2 IS NULL OR owner_id = ?2)");
    del.bind(1, key);
    if (owner) {
      del.bind(2, *owner);
    } else {
      del.bindNull(2);
    }
    del.run();
  }
  const int removed = sqlite3_changes(c.handle());
  tx.commit();
  return removed;
}

}  // namespace dlm::internal::sqlite
