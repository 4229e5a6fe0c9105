// The limits as a DBA sets them on PostgreSQL (dlm_limits, migration V8):
// an UPDATE by the schema owner applies to the next call, the application
// role can neither change nor read them, and without the row the defaults
// apply. The defaults themselves are the store contract's
// (tests/store_contract/limits_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "postgres/pg_client_role_support.h"
#include "support/error_code.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

class PgLimits : public ::testing::Test {
 protected:
  PgLimits() : store_(stores_.newStore()) {}

  // As the schema owner (the DBA).
  void setLimit(const std::string& column, std::int64_t value) {
    pqxx::work tx(stores_.admin());
    tx.exec0(fmt::format("UPDATE {} SET {} = {}", stores_.table("dlm_limits"),
                         column, value));
    tx.commit();
  }

  // The INVALID_ARGUMENT `fn` throws names `limit` with `value`.
  static void expectRefusedBy(const std::string& limit, std::int64_t value,
                              const std::function<void()>& fn) {
    const DLMException e = errorOf(fn);
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_NE(std::string(e.what()).find(
                  fmt::format("(limit {} = {})", limit, value)),
              std::string::npos)
        << e.what();
  }

  ClientStores stores_;
  std::unique_ptr<PostgresStore> store_;
  const std::string scope_ = "DC#f#limits#";
};

TEST_F(PgLimits, ALimitTheDbaLowersAppliesToTheNextCall) {
  setLimit("max_keys_per_call", 2);
  EXPECT_TRUE(acquireAs(*store_, pathKey(scope_, "a.b"), "o", "t1").acquired);
  expectRefusedBy("max_keys_per_call", 2, [&] {
    acquireAs(*store_, pathKey(scope_, "a.b.c"), "o", "t2");
  });
  expectRefusedBy("max_keys_per_call", 2,
                  [&] { waitAs(*store_, pathKey(scope_, "a.b.c"), "w"); });

  setLimit("max_ttl_ms", 60000);
  expectRefusedBy("max_ttl_ms", 60000, [&] {
    acquireAs(*store_, pathKey(scope_, "t"), "o", "t3", 61s);
  });
  EXPECT_TRUE(
      acquireAs(*store_, pathKey(scope_, "t"), "o", "t3", 60s).acquired);
  expectRefusedBy("max_ttl_ms", 60000, [&] {
    store_->extend(pathKey(scope_, "t").key, "t3", 61s, LockMode::EXCLUSIVE);
  });

  setLimit("max_key_bytes", 20);
  expectRefusedBy("max_key_bytes", 20, [&] {
    acquireAs(*store_, pathKey(scope_, "long-enough"), "o", "t4");
  });

  setLimit("max_requests_per_owner", 1);
  EXPECT_TRUE(
      waitAs(*store_, pathKey(scope_, "r1"), "w").deadlockCycle.empty());
  expectRefusedBy("max_requests_per_owner", 1,
                  [&] { waitAs(*store_, pathKey(scope_, "r2"), "w"); });

  setLimit("max_shared_holders_per_key", 2);
  const Holder holder{"test-host", 1};
  const auto shared = [&](const std::string& token) {
    return store_->tryAcquire(AcquireRequest{pathKey(scope_, "doc"), "o", token,
                                             30s, holder, LockMode::SHARED});
  };
  EXPECT_TRUE(shared("s1").acquired);
  EXPECT_TRUE(shared("s2").acquired);
  expectRefusedBy("max_shared_holders_per_key", 2, [&] { shared("s3"); });

  // Raised again: served.
  setLimit("max_shared_holders_per_key", 3);
  EXPECT_TRUE(shared("s3").acquired);
  setLimit("max_keys_per_call", 64);
  EXPECT_TRUE(acquireAs(*store_, pathKey(scope_, "x.y.z"), "o", "t5").acquired);
}

TEST_F(PgLimits, TheApplicationRoleCannotChangeTheLimits) {
  pqxx::connection client(stores_.conninfo());
  pqxx::work tx(client);
  EXPECT_THROW(tx.exec0(fmt::format("UPDATE {} SET max_ttl_ms = 1",
                                    stores_.table("dlm_limits"))),
               pqxx::insufficient_privilege);
}

TEST_F(PgLimits, WithoutTheRowTheDefaultsApply) {
  {
    pqxx::work tx(stores_.admin());
    tx.exec0("DELETE FROM " + stores_.table("dlm_limits"));
    tx.commit();
  }
  std::string id = "p";
  for (int i = 1; i < 64; ++i) id += ".p";
  EXPECT_TRUE(acquireAs(*store_, pathKey(scope_, id), "o", "t1").acquired);
  expectRefusedBy("max_keys_per_call", 64, [&] {
    acquireAs(*store_, pathKey(scope_, id + ".p"), "o", "t2");
  });
  expectRefusedBy("max_ttl_ms", 31536000000, [&] {
    store_->extend(pathKey(scope_, id).key, "t1", 31536000001ms,
                   LockMode::EXCLUSIVE);
  });
}

}  // namespace
}  // namespace dlm::test
