// Which waited keys a release notification (schema 14 on: hints, no key) is
// delivered as: the freed key's waiters, those of the keys below it and
// those of its ancestors; never a sibling's; nothing for a payload of
// another form. No server needed: the hints are made up.
#include "postgres/release_hints.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlm::test {
namespace {

using Keys = std::vector<std::string>;
using internal::ReleaseHints;

// Waiters for a, a.b.c and s.x (hint "h<key>"; ancestors root first).
void expectWaitedKeys(ReleaseHints& hints) {
  hints.expect("a", {"ha"});
  hints.expect("a.b.c", {"habc", "ha", "hab"});
  hints.expect("s.x", {"hsx", "hs"});
}

TEST(ReleaseHints, AReleaseReachesTheWaitersAboveAndBelowItsKey) {
  ReleaseHints hints;
  expectWaitedKeys(hints);
  // a.b freed: its ancestor a and its descendant a.b.c may go on.
  EXPECT_EQ(hints.keysFreedBy("1 hab ha"), (Keys{"a", "a.b.c"}));
  // a freed: a itself, and a.b.c below it.
  EXPECT_EQ(hints.keysFreedBy("1 ha"), (Keys{"a", "a.b.c"}));
  // a.b.c.d freed: a and a.b.c are above it.
  EXPECT_EQ(hints.keysFreedBy("1 habcd ha hab habc"), (Keys{"a", "a.b.c"}));
}

TEST(ReleaseHints, ASiblingsReleaseOrAnotherFormReachesNoOne) {
  ReleaseHints hints;
  expectWaitedKeys(hints);
  EXPECT_EQ(hints.keysFreedBy("1 hsy hs"), Keys{}) << "s.y is s.x's sibling";
  EXPECT_EQ(hints.keysFreedBy("DC#farm1#orders#a"), Keys{})
      << "a key (schema 13 and older, or forged) matches nothing";
  EXPECT_EQ(hints.keysFreedBy(""), Keys{});
  EXPECT_EQ(hints.keysFreedBy("1 "), Keys{});
}

TEST(ReleaseHints, TheOldestKeyIsForgottenFirst) {
  ReleaseHints hints;
  for (std::size_t i = 0; i <= ReleaseHints::kMaxKeys; ++i) {
    hints.expect("k" + std::to_string(i), {"h" + std::to_string(i)});
  }
  EXPECT_FALSE(hints.knows("k0"));
  EXPECT_EQ(hints.keysFreedBy("1 h0"), Keys{});
  EXPECT_TRUE(hints.knows("k1"));
  EXPECT_EQ(hints.keysFreedBy("1 h1"), Keys{"k1"});
  // Expecting a key again replaces its hints.
  hints.expect("k1", {"h1bis"});
  EXPECT_EQ(hints.keysFreedBy("1 h1"), Keys{});
  EXPECT_EQ(hints.keysFreedBy("1 h1bis"), Keys{"k1"});
}

}  // namespace
}  // namespace dlm::test
