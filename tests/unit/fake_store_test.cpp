// The fake store's own inspection calls (listWaiters, schemaState), which
// manager tests rely on to look at waits without a database.
#include "support/fake_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_keys.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;

TEST(FakeStoreInspection,
     ListWaitersShowsLiveRequestsByPrefixInKeyThenAgeOrder) {
  FakeStore store;
  const StoreKey b = pathKey("c#", "b");
  const StoreKey a = pathKey("c#", "a");
  const StoreKey other = pathKey("d#", "a");
  ASSERT_TRUE(
      store.registerWait({b, "z", milliseconds(1000)}).deadlockCycle.empty());
  ASSERT_TRUE(
      store.registerWait({a, "z", milliseconds(1000)}).deadlockCycle.empty());
  store.advance(milliseconds(10));
  ASSERT_TRUE(
      store.registerWait({a, "y", milliseconds(100)}).deadlockCycle.empty());
  ASSERT_TRUE(store.registerWait({other, "x", milliseconds(1000)})
                  .deadlockCycle.empty());

  auto waiters = store.listWaiters("c#");
  ASSERT_EQ(waiters.size(), 3U);
  EXPECT_EQ(waiters[0].key, "c#a");
  EXPECT_EQ(waiters[0].owner, "z");  // the older request first
  EXPECT_EQ(waiters[1].key, "c#a");
  EXPECT_EQ(waiters[1].owner, "y");
  EXPECT_EQ(waiters[2].key, "c#b");
  EXPECT_EQ(waiters[1].requestedAt + milliseconds(100), waiters[1].expiresAt);
  EXPECT_EQ(store.listWaiters("").size(), 4U);

  // A repeated registration keeps when the wait began.
  const StoreTime began = waiters[0].requestedAt;
  store.advance(milliseconds(10));
  ASSERT_TRUE(
      store.registerWait({a, "z", milliseconds(1000)}).deadlockCycle.empty());
  EXPECT_EQ(store.listWaiters("c#a")[0].requestedAt, began);

  // Past its deadline a request is no longer listed.
  store.advance(milliseconds(100));
  waiters = store.listWaiters("c#a");
  ASSERT_EQ(waiters.size(), 1U);
  EXPECT_EQ(waiters[0].owner, "z");
  store.unregisterWait("c#a", "z");
  EXPECT_TRUE(store.listWaiters("c#a").empty());
}

TEST(FakeStoreInspection, SchemaStateIsPresentUnlessSetOtherwise) {
  FakeStore store;
  EXPECT_TRUE(store.schemaState().present);
  SchemaState state;
  state.present = true;
  state.applied.push_back(
      {1, "create lock tables", "2026-11-24T12:00:00.000Z", std::nullopt});
  state.applied.push_back({2, "wait graph", "2026-11-24T12:00:01.000Z", std::nullopt});
  store.setSchemaState(state);
  EXPECT_EQ(store.schemaState().version(), 2);
  store.setSchemaState(SchemaState{});
  EXPECT_FALSE(store.schemaState().present);
}

}  // namespace
}  // namespace dlm::test
