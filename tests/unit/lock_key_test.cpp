// The key rules of dlm/lock_key.h: the manager's own, public for tools.
#include "dlm/lock_key.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dlm/error.h"
#include "support/error_code.h"

namespace dlm {
namespace {

const LockKeyScope kScope{"farm1", "billing", '.', true};

using test::codeOf;

TEST(KeyBuilder, PrefixesNameTheScope) {
  EXPECT_EQ(lockKeyPrefix(LockLevel::DC, kScope), "DC#farm1#billing#");
  EXPECT_EQ(lockKeyPrefix(LockLevel::XDC, kScope), "XDC#billing#");
}

TEST(KeyBuilder, DcKeysCarryFarmAndClient) {
  EXPECT_EQ(lockStoreKey(LockLevel::DC, kScope, "job").key,
            "DC#farm1#billing#job");
}

TEST(KeyBuilder, XdcKeysCarryNoFarm) {
  EXPECT_EQ(lockStoreKey(LockLevel::XDC, kScope, "job").key,
            "XDC#billing#job");
}

TEST(KeyBuilder, AncestorsAreListedRootFirst) {
  const StoreKey k = lockStoreKey(LockLevel::DC, kScope, "a.b.c");
  EXPECT_EQ(k.ancestors, (std::vector<std::string>{"DC#farm1#billing#a",
                                                   "DC#farm1#billing#a.b"}));
  EXPECT_EQ(k.descendantsBegin, "DC#farm1#billing#a.b.c.");
  EXPECT_EQ(k.descendantsEnd, "DC#farm1#billing#a.b.c/");
}

TEST(KeyBuilder, DescendantRangeHoldsChildrenButNotLookalikeSiblings) {
  const StoreKey k = lockStoreKey(LockLevel::DC, kScope, "a.b");
  const std::string child = "DC#farm1#billing#a.b.x";
  const std::string lookalike = "DC#farm1#billing#a.bc";
  EXPECT_TRUE(child >= k.descendantsBegin && child < k.descendantsEnd);
  EXPECT_FALSE(lookalike >= k.descendantsBegin && lookalike < k.descendantsEnd);
}

TEST(KeyBuilder, EmptySegmentsAreInvalid) {
  for (const char* id : {".a", "a..b", "a.", "."}) {
    try {
      lockStoreKey(LockLevel::DC, kScope, id);
      FAIL() << "accepted " << id;
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << id;
    }
  }
}

TEST(KeyBuilder, WithoutHierarchyIdsAreFlat) {
  LockKeyScope flat = kScope;
  flat.hierarchy = false;
  const StoreKey k = lockStoreKey(LockLevel::DC, flat, "a..b.");
  EXPECT_EQ(k.key, "DC#farm1#billing#a..b.");
  EXPECT_TRUE(k.ancestors.empty());
  EXPECT_TRUE(k.descendantsBegin.empty());
}

TEST(KeyBuilder, CustomSeparatorSplitsPaths) {
  LockKeyScope slash = kScope;
  slash.separator = '/';
  const StoreKey k = lockStoreKey(LockLevel::XDC, slash, "a/b.c");
  EXPECT_EQ(k.ancestors, std::vector<std::string>{"XDC#billing#a"});
  EXPECT_EQ(k.descendantsEnd, "XDC#billing#a/b.c0");
}

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
    EXPECT_EQ(codeOf([&] { validateLockId(bad); }),
              ErrorCode::INVALID_ARGUMENT);
  }
}

TEST(ValidateScopeName, RejectsHashAndRequiresValueWhenAsked) {
  EXPECT_EQ(codeOf([] { validateClientId("a#b"); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] { validateClientId(""); }), ErrorCode::INVALID_ARGUMENT);
  EXPECT_NO_THROW(validateFarmId("", LockLevel::XDC));
  EXPECT_EQ(codeOf([] { validateFarmId("", LockLevel::DC); }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(codeOf([] {
              validateFarmId(std::string(256, 'f'), LockLevel::XDC);
            }),
            ErrorCode::INVALID_ARGUMENT);
  EXPECT_NO_THROW(validateFarmId(std::string(255, 'f'), LockLevel::DC));
}

TEST(ValidateScopeName, MessagesNameTheArgument) {
  try {
    validateClientId("");
    FAIL() << "accepted an empty clientId";
  } catch (const DLMException& e) {
    EXPECT_NE(std::string(e.what()).find("clientId"), std::string::npos)
        << e.what();
  }
  try {
    validateFarmId("a#b", LockLevel::DC);
    FAIL() << "accepted farmId a#b";
  } catch (const DLMException& e) {
    EXPECT_NE(std::string(e.what()).find("farmId"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dlm
