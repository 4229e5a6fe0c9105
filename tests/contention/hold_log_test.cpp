// The hold checker shared by `dlmctl demo` and the contention tests: it must
// find every kind of violation, or passing contention runs would prove
// nothing.
#include "hold_log.h"

#include <gtest/gtest.h>

namespace dlm::oracle {
namespace {

Hold hold(const std::string& key, std::int64_t start, std::int64_t end,
          std::int64_t fencing, int worker = 1) {
  Hold h;
  h.key = key;
  h.worker = worker;
  h.startNs = start;
  h.endNs = end;
  h.fencing = fencing;
  return h;
}

TEST(HoldLog, DisjointHoldsOfOneKeyWithGrowingTokensPass) {
  const auto report = checkHolds(
      {hold("a", 0, 10, 1), hold("a", 20, 30, 2), hold("a", 31, 40, 3)});
  EXPECT_TRUE(report.ok());
  ASSERT_EQ(report.keys.size(), 1u);
  EXPECT_EQ(report.keys[0].holds, 3);
  EXPECT_EQ(report.keys[0].firstFencing, 1);
  EXPECT_EQ(report.keys[0].lastFencing, 3);
}

TEST(HoldLog, OverlappingHoldsOfOneKeyAreReported) {
  const auto report =
      checkHolds({hold("a", 0, 10, 1, 1), hold("a", 5, 15, 2, 2)});
  EXPECT_EQ(report.overlapCount, 1);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.keys[0].overlaps, 1);
  EXPECT_FALSE(describeProblems(report).empty());
}

TEST(HoldLog, TouchingIntervalsCountAsOverlapping) {
  EXPECT_EQ(
      checkHolds({hold("a", 0, 10, 1), hold("a", 10, 20, 2)}).overlapCount, 1);
}

TEST(HoldLog, HoldsInsideALongHoldAreAllReported) {
  const auto report = checkHolds({hold("a", 0, 100, 1), hold("b", 10, 20, 1),
                                  hold("a", 30, 40, 2), hold("a", 50, 60, 3)});
  EXPECT_EQ(report.overlapCount, 2);
}

TEST(HoldLog, AncestorAndDescendantConflict) {
  EXPECT_EQ(checkHolds({hold("job", 0, 10, 1), hold("job.a.x", 5, 15, 1)})
                .overlapCount,
            1);
  EXPECT_EQ(
      checkHolds({hold("job.a", 0, 10, 1), hold("job", 5, 15, 1)}).overlapCount,
      1);
}

TEST(HoldLog, SiblingsAndPrefixNamesDoNotConflict) {
  EXPECT_TRUE(
      checkHolds({hold("job.a", 0, 10, 1), hold("job.b", 0, 10, 1)}).ok());
  // "jobs" starts with "job" but is not its descendant.
  EXPECT_TRUE(checkHolds({hold("job", 0, 10, 1), hold("jobs", 0, 10, 1)}).ok());
  EXPECT_TRUE(
      checkHolds({hold("job", 0, 10, 1), hold("job.a", 0, 10, 1)}, '/').ok());
}

TEST(HoldLog, FencingTokensThatDoNotGrowAreReported) {
  const auto repeated = checkHolds({hold("a", 0, 10, 5), hold("a", 20, 30, 5)});
  EXPECT_EQ(repeated.fencingViolations.size(), 1u);
  EXPECT_FALSE(repeated.keys[0].fencingIncreasing);
  // Order is by hold start, not by the order the holds were given in.
  const auto backwards =
      checkHolds({hold("a", 20, 30, 1), hold("a", 0, 10, 2)});
  EXPECT_EQ(backwards.fencingViolations.size(), 1u);
  // Each key has its own sequence.
  EXPECT_TRUE(checkHolds({hold("a", 0, 10, 7), hold("b", 20, 30, 1)}).ok());
}

Hold sharedHold(const std::string& key, std::int64_t start, std::int64_t end,
                std::int64_t fencing, int worker = 1) {
  Hold h = hold(key, start, end, fencing, worker);
  h.shared = true;
  return h;
}

TEST(HoldLog, SharedHoldsMayOverlapButNotWithExclusiveOnes) {
  // Readers of one key, and of an ancestor and a descendant, together.
  EXPECT_TRUE(
      checkHolds({sharedHold("a", 0, 10, 1), sharedHold("a", 5, 15, 2),
                  sharedHold("a.b", 6, 8, 1), sharedHold("a.b.c", 7, 9, 1)})
          .ok());
  // A writer overlapping a reader of the same key, of an ancestor or of a
  // descendant is a violation; a writer of a sibling is not.
  EXPECT_EQ(
      checkHolds({sharedHold("a", 0, 10, 1), hold("a", 5, 15, 2)}).overlapCount,
      1);
  EXPECT_EQ(checkHolds({sharedHold("a", 0, 10, 1), hold("a.b", 5, 15, 1)})
                .overlapCount,
            1);
  EXPECT_EQ(checkHolds({hold("a", 0, 10, 1), sharedHold("a.b", 5, 15, 1)})
                .overlapCount,
            1);
  EXPECT_TRUE(
      checkHolds({sharedHold("a.b", 0, 10, 1), hold("a.c", 5, 15, 1)}).ok());
}

TEST(HoldLog, CountsOverlappingSharedPairs) {
  // a/a overlap, a/a.b overlap, a.b/a.c overlap but are siblings, the last a
  // starts after everything ended; the exclusive z counts for nothing.
  const auto report =
      checkHolds({sharedHold("a", 0, 10, 1), sharedHold("a", 5, 15, 2),
                  sharedHold("a.b", 12, 17, 1), sharedHold("a.c", 16, 18, 1),
                  hold("z", 0, 20, 1), sharedHold("a", 30, 40, 3)});
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.sharedOverlapCount, 2);
  // Shared overlaps are not violations, and exclusive overlaps are not
  // counted as shared ones.
  const auto mixed =
      checkHolds({sharedHold("a", 0, 10, 1), hold("a.b", 5, 15, 1)});
  EXPECT_EQ(mixed.sharedOverlapCount, 0);
  EXPECT_EQ(mixed.overlapCount, 1);
}

TEST(HoldLog, ConcurrentSharedHoldsMayStartInEitherTokenOrder) {
  // Two readers whose acquisitions returned in the other order: fine.
  EXPECT_TRUE(
      checkHolds({sharedHold("a", 0, 10, 2), sharedHold("a", 1, 12, 1)}).ok());
  // Even when the one granted first recorded its hold after the other's
  // ended: its acquire call returned late (both were held at once in the
  // database).
  EXPECT_TRUE(
      checkHolds({sharedHold("a", 0, 10, 3), sharedHold("a", 11, 20, 2)}).ok());
  // But against an exclusive hold, on either side, a token must exceed
  // every token of a hold that ended before it began.
  const auto afterWriter =
      checkHolds({hold("a", 0, 10, 3), sharedHold("a", 11, 20, 2)});
  EXPECT_EQ(afterWriter.fencingViolations.size(), 1u);
  const auto afterReader =
      checkHolds({sharedHold("a", 0, 10, 3), hold("a", 11, 20, 2)});
  EXPECT_EQ(afterReader.fencingViolations.size(), 1u);
  // A writer after two readers, the larger token ended first.
  const auto afterReaders =
      checkHolds({sharedHold("a", 0, 10, 3), sharedHold("a", 1, 12, 2),
                  hold("a", 13, 20, 4)});
  EXPECT_TRUE(afterReaders.ok());
  const auto belowReaders =
      checkHolds({sharedHold("a", 0, 10, 3), sharedHold("a", 1, 12, 4),
                  hold("a", 13, 20, 2)});
  EXPECT_EQ(belowReaders.fencingViolations.size(), 1u);
  // And tokens are unique.
  const auto twice =
      checkHolds({sharedHold("a", 0, 10, 4), sharedHold("a", 5, 20, 4)});
  EXPECT_EQ(twice.fencingViolations.size(), 1u);
  EXPECT_FALSE(twice.keys[0].fencingIncreasing);
}

// A hold with its store's acquiredAt and its release call's wall time.
Hold timed(Hold h, std::int64_t acquiredAtMs, std::int64_t releaseCalledMs) {
  h.acquiredAtMs = acquiredAtMs;
  h.releaseCalledMs = releaseCalledMs;
  return h;
}

TEST(HoldLog, AnAcquisitionTimeBeforeTheReleaseItWaitedForIsReported) {
  // b waited for a (the same key, an ancestor, a descendant): its
  // possession cannot begin before a's release call.
  EXPECT_TRUE(checkHolds({timed(hold("a", 0, 10, 1), 100, 200),
                          timed(hold("a", 20, 30, 2), 200, 300)})
                  .ok());
  for (const char* other : {"a", "a.b", "z.y"}) {
    const auto early = checkHolds({timed(hold("z.y", 0, 10, 1), 100, 200),
                                   timed(hold(other, 20, 30, 2), 191, 300)});
    EXPECT_EQ(early.earlyAcquisitionCount, other[0] == 'z' ? 1 : 0) << other;
  }
  const auto descendant = checkHolds({timed(hold("a.b", 0, 10, 1), 100, 200),
                                      timed(hold("a", 20, 30, 1), 199, 300)});
  EXPECT_EQ(descendant.earlyAcquisitionCount, 1);
  EXPECT_FALSE(descendant.ok());
  EXPECT_FALSE(describeProblems(descendant).empty());
  // Readers after readers prove no order; a reader after a writer does.
  EXPECT_TRUE(checkHolds({timed(sharedHold("a", 0, 10, 1), 100, 200),
                          timed(sharedHold("a", 20, 30, 2), 150, 300)})
                  .ok());
  EXPECT_EQ(checkHolds({timed(hold("a", 0, 10, 1), 100, 200),
                        timed(sharedHold("a", 20, 30, 2), 150, 300)})
                .earlyAcquisitionCount,
            1);
  // The latest release call counts; unknown times (0) are not judged.
  EXPECT_EQ(checkHolds({timed(hold("a.b", 0, 10, 1), 100, 200),
                        timed(hold("a.c", 0, 12, 1), 100, 250),
                        timed(hold("a", 20, 30, 1), 220, 300)})
                .earlyAcquisitionCount,
            1);
  EXPECT_TRUE(
      checkHolds({hold("a", 0, 10, 1), timed(hold("a", 20, 30, 2), 5, 0)})
          .ok());
}

TEST(HoldLog, FailedReleasesAreReported) {
  Hold h = hold("a", 0, 10, 1);
  h.released = false;
  const auto report = checkHolds({h});
  EXPECT_EQ(report.failedReleases.size(), 1u);
  EXPECT_FALSE(report.ok());
}

TEST(HoldLog, LinesRoundTripAnyKey) {
  Hold h = hold("we\tird\\key\nwith spaces", -5, 123456789012345, 42, 7);
  h.released = false;
  h.shared = true;
  h.acquiredAtMs = 1795764863485;
  h.releaseCalledMs = 1795764863490;
  const auto parsed = parseHold(formatHold(h));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(parsed->shared);
  EXPECT_FALSE(parseHold(formatHold(hold("k", 1, 2, 3)))->shared);
  EXPECT_EQ(parsed->key, h.key);
  EXPECT_EQ(parsed->worker, 7);
  EXPECT_EQ(parsed->startNs, -5);
  EXPECT_EQ(parsed->endNs, 123456789012345);
  EXPECT_EQ(parsed->fencing, 42);
  EXPECT_FALSE(parsed->released);
  EXPECT_EQ(parsed->acquiredAtMs, 1795764863485);
  EXPECT_EQ(parsed->releaseCalledMs, 1795764863490);
  EXPECT_EQ(formatHold(h).find('\n'), std::string::npos);
}

TEST(HoldLog, MalformedLinesAreRejected) {
  EXPECT_FALSE(parseHold("").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t1").has_value());
  EXPECT_FALSE(parseHold("x\t2\t3\t4\t1\tkey").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t2\tkey").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t1\tX\t5\t6\tbad\\escape").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t1\tQ\t5\t6\tkey").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t1\tS\tx\t6\tkey").has_value());
  EXPECT_FALSE(parseHold("1\t2\t3\t4\t1\tS\tkey").has_value());
  EXPECT_TRUE(parseHold("1\t2\t3\t4\t1\tS\t5\t6\tkey").has_value());
}

}  // namespace
}  // namespace dlm::oracle
