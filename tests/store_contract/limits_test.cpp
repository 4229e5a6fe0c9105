// The limits every store enforces, at their documented defaults: a call at
// a limit is served, one over it is refused with INVALID_ARGUMENT naming the
// limit ("(limit max_keys_per_call = 64)"), and nothing is left behind. How a
// DBA changes them is store-specific (tests/postgres, tests/sqlite).
#include <string>

#include "store_contract/store_contract_fixture.h"

namespace dlm::test {
namespace {

using std::chrono::milliseconds;
using Limits = StoreContract;

constexpr milliseconds kMaxTtl{31536000000};  // 365 days

// The INVALID_ARGUMENT `fn` throws names `limit`.
void expectRefusedBy(const std::string& limit,
                     const std::function<void()>& fn) {
  const DLMException e = errorOf(fn);
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
  EXPECT_NE(std::string(e.what()).find("(limit " + limit + " = "),
            std::string::npos)
      << e.what();
}

// An id of `segments` path segments.
std::string pathOf(int segments) {
  std::string id = "p";
  for (int i = 1; i < segments; ++i) id += ".p";
  return id;
}

TEST_P(Limits, ALeaseOverMaxTtlIsRefusedWhenAcquiredAndWhenExtended) {
  EXPECT_TRUE(acquire("year", "A", "t1", kMaxTtl).acquired);
  expectRefusedBy("max_ttl_ms", [&] {
    acquire("longer", "A", "t2", kMaxTtl + milliseconds(1));
  });
  expectRefusedBy("max_ttl_ms", [&] {
    acquireShared("longer", "A", "t3", kMaxTtl + milliseconds(1));
  });
  EXPECT_FALSE(describe(store(), key("longer").key).has_value() &&
               describe(store(), key("longer").key)->statusHeld);
  EXPECT_TRUE(extend("year", "t1", kMaxTtl).has_value());
  expectRefusedBy("max_ttl_ms",
                  [&] { extend("year", "t1", kMaxTtl + milliseconds(1)); });
  EXPECT_TRUE(release("year", "t1"));
}

TEST_P(Limits, AKeyOverMaxKeyBytesIsRefused) {
  const std::size_t room = 8192 - scope().size();
  EXPECT_TRUE(acquire(std::string(room, 'k'), "A", "t1").acquired);
  expectRefusedBy("max_key_bytes",
                  [&] { acquire(std::string(room + 1, 'k'), "A", "t2"); });
  expectRefusedBy("max_key_bytes",
                  [&] { wait(std::string(room + 1, 'k'), "W"); });
  EXPECT_EQ(waiting(), Ids{});
}

TEST_P(Limits, MoreKeysInOneCallThanMaxKeysPerCallAreRefused) {
  // The key and its ancestors: 64 keys are served, 65 are not.
  EXPECT_TRUE(acquire(pathOf(64), "A", "t1").acquired);
  expectRefusedBy("max_keys_per_call", [&] { acquire(pathOf(65), "A", "t2"); });
  expectRefusedBy("max_keys_per_call",
                  [&] { acquireShared(pathOf(65), "A", "t3"); });
  expectRefusedBy("max_keys_per_call", [&] { wait(pathOf(65), "W"); });
  EXPECT_EQ(waiting(), Ids{});
}

TEST_P(Limits, AnOwnerGetsAtMostMaxRequestsPerOwnerLiveRequests) {
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(wait("r" + std::to_string(i), "W"), Ids{}) << i;
  }
  expectRefusedBy("max_requests_per_owner", [&] { wait("r100", "W"); });
  // Renewing one of its requests is not a new one; another owner has its
  // own allowance.
  EXPECT_EQ(wait("r7", "W"), Ids{});
  EXPECT_EQ(wait("r100", "V"), Ids{});
  // A request that ends makes room.
  unregister("r7", "W");
  EXPECT_EQ(wait("r100", "W"), Ids{});
}

TEST_P(Limits, AKeyGetsAtMostMaxSharedHoldersPerKey) {
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(acquireShared("doc", "R" + std::to_string(i % 10),
                              "t" + std::to_string(i))
                    .acquired)
        << i;
  }
  expectRefusedBy("max_shared_holders_per_key",
                  [&] { acquireShared("doc", "R", "t1000"); });
  // A retry of a holder's own acquisition is still answered as held.
  EXPECT_TRUE(acquireShared("doc", "R3", "t3").acquired);
  // A released hold makes room.
  EXPECT_TRUE(release("doc", "t3", LockMode::SHARED));
  EXPECT_TRUE(acquireShared("doc", "R", "t1000").acquired);
}

INSTANTIATE_TEST_SUITE_P(Stores, Limits, ::testing::ValuesIn(contractStores()),
                         contractParamName);

}  // namespace
}  // namespace dlm::test
