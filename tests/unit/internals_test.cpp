// White-box tests of internal helpers with no public face: the UTF-8 check
// behind the id rules, CRC-32, random GUIDs.
#include "keys/validation.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

#include "common/crc32.h"
#include "common/random_id.h"

namespace dlm::internal {
namespace {

TEST(IsValidUtf8, RejectsMalformedSequences) {
  EXPECT_TRUE(isValidUtf8("b\xC3\xA4r.\xE2\x82\xAC.\xF0\x9F\x94\x92"));
  for (const char* bad : {"\xFF", "\xC3", "\xC0\xAF", "\xED\xA0\x80",
                          "\xF4\x90\x80\x80", "a\xE2\x82"}) {
    EXPECT_FALSE(isValidUtf8(bad)) << bad;
  }
}

TEST(PrintableBytes, EscapesOnlyWhatIsNotPlainText) {
  EXPECT_EQ(printableBytes("b\xC3\xA4r.job"), "b\xC3\xA4r.job");
  EXPECT_EQ(printableBytes("a\xFF"), "a\\xFF");
  EXPECT_EQ(printableBytes("a\x01" "b"), "a\\x01b");
  // Not valid UTF-8 as a whole: every high byte is escaped.
  EXPECT_EQ(printableBytes("\xC3\xA4\xFF"), "\\xC3\\xA4\\xFF");
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
