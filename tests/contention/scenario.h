// The contention scenario shared by the test process and the worker
// processes it spawns: which keys, how long holds last, how locks are taken.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "contender.h"
#include "dlm/lock_configuration.h"
#include "support/test_stores.h"

namespace dlm::test::contention {

// Every contender uses the same scope, so they all fight over the same keys.
inline constexpr const char* kClient = "contention";
inline constexpr const char* kFarm = "farm1";

// Three unrelated keys and a family: "job" conflicts with all of "job.a",
// "job.b", "job.a.x"; "job.a" with "job.a.x"; "job.a" and "job.b" are
// siblings and never conflict.
// The window a worker process contends in: from `startAtNs` (steady clock,
// ns, given by the parent so every process starts together) for `seconds`.
struct RunWindow {
  std::chrono::steady_clock::time_point startAt;
  std::chrono::steady_clock::time_point deadline;
};
inline RunWindow runWindow(std::int64_t startAtNs, double seconds) {
  using Duration = std::chrono::steady_clock::duration;
  const auto startAt = std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<Duration>(
          std::chrono::nanoseconds(startAtNs)));
  return {startAt, startAt + std::chrono::duration_cast<Duration>(
                                 std::chrono::duration<double>(seconds))};
}

inline std::vector<oracle::WeightedKey> scenarioKeys() {
  return {{"alpha", 3}, {"beta", 3},  {"gamma", 3},  {"job", 2},
          {"job.a", 2}, {"job.b", 2}, {"job.a.x", 1}};
}

inline LockConfiguration scenarioConfiguration() {
  LockConfiguration c;
  c.lockTtl = std::chrono::seconds(60);
  c.waitForLock = std::chrono::seconds(1);
  // Waiters poll quickly: holds last a millisecond or two.
  c.sleepBetweenRetries = std::chrono::milliseconds(2);
  // Busy databases under 16 contenders: give transient failures room.
  c.storeRetries = 8;
  c.storeRetryBackoff = std::chrono::milliseconds(5);
  // The runs judge exclusion, not speed: under a sanitizer on a busy machine
  // a call may wait seconds for SQLite's write lock (kTestStoreBudget).
  c.operationTimeout = kTestStoreBudget;
  return c;
}

// One contender's loop: `attempts` attempts or until `deadline`.
inline oracle::ContendOptions scenarioOptions(
    int worker, std::int64_t attempts,
    std::chrono::steady_clock::time_point deadline) {
  oracle::ContendOptions o;
  o.keys = scenarioKeys();
  o.worker = worker;
  o.maxAttempts = attempts;
  o.deadline = deadline;
  o.holdMin = std::chrono::microseconds(0);
  o.holdMax = std::chrono::microseconds(2000);
  o.pauseMax = std::chrono::microseconds(1000);
  // A TTL no hold comes near: an expiry would allow a legitimate takeover,
  // which the checker would report as an overlap.
  o.ttl = std::chrono::seconds(60);
  o.timeout = std::chrono::milliseconds(500);
  // Half the attempts make one try, half wait.
  o.tryPercent = 50;
  o.seed = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(worker + 1);
  return o;
}

// --- readers and writers ---------------------------------------------------
// One key family: readers take "doc" or "doc.a" SHARED (any number at once,
// parent and child together), writers take one of them EXCLUSIVE, which
// excludes every reader of the family.
inline std::vector<oracle::WeightedKey> readerKeys() {
  return {{"doc", 1}, {"doc.a", 1}};
}

// A reader: short holds and pauses, half the attempts with one try.
inline oracle::ContendOptions readerOptions(
    int worker, std::chrono::steady_clock::time_point deadline) {
  oracle::ContendOptions o = scenarioOptions(worker, 0, deadline);
  o.keys = readerKeys();
  o.sharedPercent = 100;
  return o;
}

// A writer on `key`: always waits (acquireLock), long enough to be served
// while readers keep arriving, and pauses a little so that readers get
// their turn too.
inline oracle::ContendOptions writerOptions(
    int worker, const std::string& key,
    std::chrono::steady_clock::time_point deadline) {
  oracle::ContendOptions o = scenarioOptions(worker, 0, deadline);
  o.keys = {{key, 1}};
  o.sharedPercent = 0;
  o.tryPercent = 0;
  o.timeout = std::chrono::milliseconds(3000);
  o.pauseMax = std::chrono::microseconds(5000);
  return o;
}

// --- fairness ---------------------------------------------------------------
// The starvation run: one process per key of "p", "p.c", "p.c.d",
// each looping acquireLock(timeout 2 s) / hold 1 ms / release, waiters
// polling every 5 ms.
inline std::vector<std::string> fairnessKeys() { return {"p", "p.c", "p.c.d"}; }

inline LockConfiguration fairnessConfiguration() {
  LockConfiguration c = scenarioConfiguration();
  c.waitForLock = std::chrono::seconds(2);
  c.sleepBetweenRetries = std::chrono::milliseconds(5);
  return c;
}

inline oracle::ContendOptions fairnessOptions(
    int worker, const std::string& key,
    std::chrono::steady_clock::time_point deadline) {
  oracle::ContendOptions o;
  o.keys = {{key, 1}};
  o.worker = worker;
  o.deadline = deadline;
  o.holdMin = std::chrono::microseconds(1000);
  o.holdMax = std::chrono::microseconds(1000);
  o.pauseMax = std::chrono::microseconds(0);
  o.ttl = std::chrono::seconds(60);
  o.timeout = std::chrono::milliseconds(2000);
  o.tryPercent = 0;
  o.seed = static_cast<std::uint64_t>(worker + 1);
  return o;
}

}  // namespace dlm::test::contention
