// White-box tests of internal helpers with no public face: the UTF-8 check
// behind the id rules, CRC-32, random GUIDs (and a fork()ed child's).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <set>
#include <string>

#include "common/crc32.h"
#include "common/random_id.h"
#include "keys/validation.h"

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
  EXPECT_EQ(printableBytes("a\x01"
                           "b"),
            "a\\x01b");
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

TEST(RandomGuid, AForkedChildNeverHandsOutItsParentsNextGuid) {
  randomGuid();  // the bits ahead of this one are read, in this process
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string g = randomGuid();
    const bool written =
        write(fds[1], g.data(), g.size()) == static_cast<ssize_t>(g.size());
    _exit(written ? 0 : 1);
  }
  close(fds[1]);
  const std::string parent = randomGuid();
  std::string inChild(36, '\0');
  std::size_t got = 0;
  while (got < inChild.size()) {
    const ssize_t n = read(fds[0], inChild.data() + got, inChild.size() - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(got, inChild.size());
  EXPECT_NE(parent, inChild);
}

}  // namespace
}  // namespace dlm::internal
