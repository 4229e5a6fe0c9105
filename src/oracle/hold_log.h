// A log of lock holds and the checker that proves mutual exclusion from it.
// Shared by `dlmctl demo` and the contention tests, so both judge holds the
// same way.
//
// Why the check is sound: a Hold's interval starts right after the acquire
// call returned and ends right before the release call was made, so it lies
// inside the interval during which the database considered the lock held.
// If the database never let two holders in, the recorded intervals are
// disjoint too. The converse does not hold (two client intervals may be
// disjoint while the database holds overlapped a little), so the check is
// conservative: it can miss a short overlap, never invent one.
// Timestamps are std::chrono::steady_clock nanoseconds: CLOCK_MONOTONIC on
// Linux, one clock for every process on the host.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dlm::oracle {

struct Hold {
  std::string key;           // the lock id ("job.a"), not the store key
  int worker = 0;            // who held it (process or thread number)
  std::int64_t startNs = 0;  // steady_clock, right after acquiring
  std::int64_t endNs = 0;    // steady_clock, right before releasing
  std::int64_t fencing = 0;  // the acquisition's fencing token
  bool released = true;      // releaseLock returned true
  bool shared = false;       // held in LockMode::SHARED
  // The store's acquiredAt (its clock, ms since the epoch; 0: not known) and
  // the host's wall clock right before releasing (ms, rounded down; 0: not
  // known). The stores' clocks are the host's (SQLite: the application's;
  // PostgreSQL: a server on the same host) in the tests and the demo.
  std::int64_t acquiredAtMs = 0;
  std::int64_t releaseCalledMs = 0;
};

// Current steady_clock time in nanoseconds.
std::int64_t steadyNowNs();

// One line of text, no newline; keys may hold any byte (escaped).
std::string formatHold(const Hold& hold);
// The inverse of formatHold; nullopt for a malformed line.
std::optional<Hold> parseHold(const std::string& line);

// True when holding `a` excludes holding `b`: the same key, or one is an
// ancestor of the other ("job" and "job.a.x" with separator '.').
bool keysConflict(const std::string& a, const std::string& b, char separator);

// True when the two holds may not overlap in time: their keys conflict and
// at least one of them is exclusive (shared holds of conflicting keys are
// compatible).
bool holdsConflict(const Hold& a, const Hold& b, char separator);

struct KeySummary {
  std::string key;
  std::int64_t holds = 0;
  std::int64_t firstFencing = 0;  // in hold order
  std::int64_t lastFencing = 0;
  // Unique, and above the token of every hold of the key that ended before
  // it started, unless both holds are shared (for exclusive holds: strictly
  // increasing in hold order).
  bool fencingIncreasing = true;
  std::int64_t overlaps = 0;  // overlapping pairs this key is part of
};

struct HoldReport {
  std::int64_t holds = 0;
  // Pairs of holds of conflicting keys whose intervals intersect.
  std::vector<std::pair<Hold, Hold>> overlaps;
  std::int64_t overlapCount = 0;  // overlaps may be truncated; this is not
  // Pairs of SHARED holds of conflicting keys (the same key, or ancestor and
  // descendant) whose intervals intersect: allowed, and the proof that
  // readers did share.
  std::int64_t sharedOverlapCount = 0;
  // Holds of one key whose fencing tokens are out of order: (earlier, later)
  // where the earlier ended before the later started but has a token at
  // least as large, or two holds with the same token.
  std::vector<std::pair<Hold, Hold>> fencingViolations;
  // Holds whose acquiredAt precedes the release call of a conflicting hold
  // that ended before they started: (earlier, later). A hold's acquiredAt is
  // when its possession began, so it cannot come before the end of the
  // hold it had to wait for.
  std::vector<std::pair<Hold, Hold>> earlyAcquisitions;
  std::int64_t earlyAcquisitionCount = 0;
  // Holds whose releaseLock returned false.
  std::vector<Hold> failedReleases;
  // Per key, in key order.
  std::vector<KeySummary> keys;

  bool ok() const {
    return overlapCount == 0 && fencingViolations.empty() &&
           earlyAcquisitionCount == 0 && failedReleases.empty();
  }
};

// Checks that no two conflicting holds (holdsConflict) overlap in time, that
// each key's fencing tokens are unique and grow from every hold to any hold
// that started after it ended when at least one of the two is exclusive (two
// shared holds may have been granted in either order whatever their recorded
// intervals: an acquire call can return long after its grant), that no
// hold's acquiredAt precedes the release call of a conflicting hold that
// ended before it started (where both times are known), and that every
// release returned true. Intervals
// are closed: touching intervals count as overlapping. Keeps at most
// `maxListed` overlap and fencing pairs in the report.
HoldReport checkHolds(std::vector<Hold> holds, char separator = '.',
                      std::size_t maxListed = 20);

// Human-readable lines for a report's problems ("overlap: ..."), one per
// listed pair; empty when ok().
std::vector<std::string> describeProblems(const HoldReport& report);

}  // namespace dlm::oracle
