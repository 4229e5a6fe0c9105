// The bench's CRC-32 (what its raw baselines' rows carry) stays equal to the
// library's. White-box: src/ and bench/ on this file's include path.
#include <gtest/gtest.h>

#include "common/crc32.h"
#include "crc32.h"

namespace {

TEST(BenchSql, Crc32IsTheLibrarys) {
  for (const char* key : {"", "a", "DC#farm#client#job.a", "123456789"}) {
    EXPECT_EQ(dlm_bench::crc32(key), dlm::internal::crc32(key)) << key;
  }
}

}  // namespace
