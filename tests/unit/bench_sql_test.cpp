// The bench's copies of library internals stay equal to the library's: the
// raw SQLite baseline's statements and the CRC-32 its rows carry. White-box:
// both sides are internal (src/ and bench/ on this file's include path).
#include <gtest/gtest.h>

#include "common/crc32.h"
#include "crc32.h"
#include "sqlite/cycle_sql.h"
#include "sqlite_cycle_sql.h"

namespace {

namespace bench = dlm_bench::sqlite_sql;
namespace store = dlm::internal::sqlite::sql;

TEST(BenchSql, SqliteStatementsAreTheStoresOwn) {
  EXPECT_STREQ(bench::kEnsureRow, store::kEnsureRow);
  EXPECT_STREQ(bench::kFindRetriedShared, store::kFindRetriedShared);
  EXPECT_STREQ(bench::kFindRetriedExclusive, store::kFindRetriedExclusive);
  EXPECT_STREQ(bench::kJsonAppend, store::kJsonAppend);
  EXPECT_STREQ(bench::kConflictingHolds, store::kConflictingHolds);
  EXPECT_STREQ(bench::kOlderConflictingRequests, store::kOlderConflictingRequests);
  EXPECT_STREQ(bench::kRequestPlace, store::kRequestPlace);
  EXPECT_STREQ(bench::kDeleteOwnRequest, store::kDeleteOwnRequest);
  EXPECT_STREQ(bench::kLastFencingToken, store::kLastFencingToken);
  EXPECT_STREQ(bench::kGrantExclusive, store::kGrantExclusive);
  EXPECT_STREQ(bench::kDeleteSharedHolds, store::kDeleteSharedHolds);
  EXPECT_STREQ(bench::kGrantSharedKeyRow, store::kGrantSharedKeyRow);
  EXPECT_STREQ(bench::kInsertSharedHold, store::kInsertSharedHold);
  EXPECT_STREQ(bench::kReleaseExclusive, store::kReleaseExclusive);
  EXPECT_STREQ(bench::kReleasedAlready, store::kReleasedAlready);
  EXPECT_STREQ(bench::kReleaseShared, store::kReleaseShared);
}

TEST(BenchSql, Crc32IsTheLibrarys) {
  for (const char* key : {"", "a", "DC#farm#client#job.a", "123456789"}) {
    EXPECT_EQ(dlm_bench::crc32(key), dlm::internal::crc32(key)) << key;
  }
}

}  // namespace
