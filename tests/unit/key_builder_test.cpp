#include "keys/key_builder.h"

#include <gtest/gtest.h>

#include "dlm/error.h"

namespace dlm::internal {
namespace {

const KeyScope kScope{"farm1", "billing", '.', true};

TEST(KeyBuilder, DcKeysCarryFarmAndClient) {
  EXPECT_EQ(buildStoreKey(LockLevel::DC, kScope, "job").key,
            "DC#farm1#billing#job");
}

TEST(KeyBuilder, XdcKeysCarryNoFarm) {
  EXPECT_EQ(buildStoreKey(LockLevel::XDC, kScope, "job").key,
            "XDC#billing#job");
}

TEST(KeyBuilder, AncestorsAreListedRootFirst) {
  const StoreKey k = buildStoreKey(LockLevel::DC, kScope, "a.b.c");
  EXPECT_EQ(k.ancestors, (std::vector<std::string>{"DC#farm1#billing#a",
                                                   "DC#farm1#billing#a.b"}));
  EXPECT_EQ(k.descendantsBegin, "DC#farm1#billing#a.b.c.");
  EXPECT_EQ(k.descendantsEnd, "DC#farm1#billing#a.b.c/");
}

TEST(KeyBuilder, DescendantRangeHoldsChildrenButNotLookalikeSiblings) {
  const StoreKey k = buildStoreKey(LockLevel::DC, kScope, "a.b");
  const std::string child = "DC#farm1#billing#a.b.x";
  const std::string lookalike = "DC#farm1#billing#a.bc";
  EXPECT_TRUE(child >= k.descendantsBegin && child < k.descendantsEnd);
  EXPECT_FALSE(lookalike >= k.descendantsBegin && lookalike < k.descendantsEnd);
}

TEST(KeyBuilder, EmptySegmentsAreInvalid) {
  for (const char* id : {".a", "a..b", "a.", "."}) {
    try {
      buildStoreKey(LockLevel::DC, kScope, id);
      FAIL() << "accepted " << id;
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << id;
    }
  }
}

TEST(KeyBuilder, WithoutHierarchyIdsAreFlat) {
  KeyScope flat = kScope;
  flat.hierarchy = false;
  const StoreKey k = buildStoreKey(LockLevel::DC, flat, "a..b.");
  EXPECT_EQ(k.key, "DC#farm1#billing#a..b.");
  EXPECT_TRUE(k.ancestors.empty());
  EXPECT_TRUE(k.descendantsBegin.empty());
}

TEST(KeyBuilder, CustomSeparatorSplitsPaths) {
  KeyScope slash = kScope;
  slash.separator = '/';
  const StoreKey k = buildStoreKey(LockLevel::XDC, slash, "a/b.c");
  EXPECT_EQ(k.ancestors, std::vector<std::string>{"XDC#billing#a"});
  EXPECT_EQ(k.descendantsEnd, "XDC#billing#a/b.c0");
}

}  // namespace
}  // namespace dlm::internal
