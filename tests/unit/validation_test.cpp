#include "keys/validation.h"

#include <gtest/gtest.h>

#include <array>
#include <set>

#include "common/crc32.h"
#include "dlm/error.h"
#include "common/random_id.h"
#include "support/error_code.h"

namespace dlm::internal {
namespace {

using test::codeOf;

TEST(ValidateLockId, AcceptsUtf8UpTo1024Bytes) {
  EXPECT_NO_THROW(validateLockId("order-123"));
  EXPECT_NO_THROW(validateLockId("b\xC3\xA4r.\xE2\x82\xAC.\xF0\x9F\x94\x92"));
  EXPECT_NO_THROW(validateLockId(std::string(1024, 'x')));
}

TEST(ValidateLockId, RejectsEmptyLongNulAndBadUtf8) {
  EXPECT_EQ(codeOf([] { validateLockId(""); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] { validateLockId(std::string(1025, 'x')); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] { validateLockId(std::string("a\0b", 3)); }),
            ErrorCode::INVALID_ARGUMENT);
  for (const char* bad : {"\xFF", "\xC3", "\xC0\xAF", "\xED\xA0\x80",
                          "\xF4\x90\x80\x80", "a\xE2\x82"}) {
    EXPECT_FALSE(isValidUtf8(bad)) << bad;
    EXPECT_EQ(codeOf([&] { validateLockId(bad); }),
              ErrorCode::INVALID_ARGUMENT);
  }
}

TEST(ValidateScopeName, RejectsHashAndRequiresValueWhenAsked) {
  EXPECT_EQ(codeOf([] { validateScopeName("clientId", "a#b", true); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] { validateScopeName("clientId", "", true); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_NO_THROW(validateScopeName("farmId", "", false));
  EXPECT_EQ(
      codeOf([] { validateScopeName("farmId", std::string(256, 'f'), false); }),
      ErrorCode::INVALID_ARGUMENT);
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32("123456789"), 0xCBF43926U);
  EXPECT_EQ(crc32(""), 0U);
}

TEST(RandomGuid, Is128RandomBitsInGuidText) {
  const std::string a = randomGuid();
  const std::string b = randomGuid();
  ASSERT_EQ(a.size(), 36U);
  for (std::size_t i : {8U, 13U, 18U, 23U}) EXPECT_EQ(a[i], '-') << a;
  EXPECT_NE(a, b);
  // Every hex digit takes every value somewhere in 200 draws (a version or
  // variant digit would be stuck), and no position is constant.
  std::array<std::set<char>, 36> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string g = randomGuid();
    for (std::size_t p = 0; p < g.size(); ++p) seen[p].insert(g[p]);
  }
  for (std::size_t p = 0; p < seen.size(); ++p) {
    if (p == 8 || p == 13 || p == 18 || p == 23) continue;
    EXPECT_GE(seen[p].size(), 12U) << "position " << p;
  }
}

}  // namespace
}  // namespace dlm::internal
