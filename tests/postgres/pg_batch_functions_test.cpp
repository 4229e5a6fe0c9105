// dlm_release_each and dlm_extend_each called as the application role, the
// way the library calls them (tests/store_contract covers them through the
// store): each key's answer in argument order, a row locked by another
// transaction answered 'single' at once instead of waited for, and a key
// another token holds answered 'lost'.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "postgres/pg_array.h"
#include "postgres/pg_client_role_support.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using Answers = std::vector<std::string>;

class PgBatchFunctionsTest : public ::testing::Test {
 protected:
  PgBatchFunctionsTest() : store_(stores_.newStore()) {}

  StoreKey key(const std::string& id) { return pathKey(scope_, id); }

  bool held(const std::string& id) {
    const auto r = store_->describe(key(id).key);
    return r && r->held;
  }

  void hold(const std::string& id, const std::string& token) {
    ASSERT_TRUE(acquireAs(*store_, key(id), "owner-" + token, token).acquired);
  }

  // One call as the application role with the arrays as parameters, under
  // a statement timeout: a call that waited for a row lock fails with it
  // instead of answering. The outcomes in argument order.
  Answers call(const std::string& function,
               const std::vector<std::pair<std::string, std::string>>& locks) {
    std::vector<std::string> keys, tokens, ends;
    std::vector<std::int64_t> ttls;
    for (const auto& [id, token] : locks) {
      keys.push_back(key(id).key);
      tokens.push_back(token);
      ends.push_back(key(id).descendantsEnd);
      ttls.push_back(60000);
    }
    const bool release = function == "dlm_release_each";
    pqxx::connection c(stores_.conninfo());
    pqxx::work tx(c);
    tx.exec("SET LOCAL search_path = " +
            tx.quote_name(stores_.schema().name()));
    tx.exec("SET LOCAL statement_timeout = '20s'");
    const pqxx::result r = tx.exec_params(
        "SELECT ord, outcome FROM " + function + "($1::text[], $2::text[], " +
            (release ? "$3::text[]" : "$3::bigint[]") + ") ORDER BY ord",
        literal(keys), literal(tokens),
        release ? literal(ends) : internal::bigintArrayLiteral(ttls));
    tx.commit();
    Answers out;
    for (const auto& row : r) out.push_back(row[1].as<std::string>());
    return out;
  }

  Answers releaseEach(
      const std::vector<std::pair<std::string, std::string>>& locks) {
    return call("dlm_release_each", locks);
  }

  Answers extendEach(
      const std::vector<std::pair<std::string, std::string>>& locks) {
    return call("dlm_extend_each", locks);
  }

  static std::string literal(const std::vector<std::string>& items) {
    return internal::textArrayLiteral(
        std::vector<std::string_view>(items.begin(), items.end()));
  }

  // Another transaction (the admin's: the application role may not lock
  // dlm's rows) holding the row of `id` locked until it ends.
  std::unique_ptr<pqxx::work> lockRow(const std::string& id) {
    auto tx = std::make_unique<pqxx::work>(stores_.admin());
    tx->exec("SET LOCAL search_path = " +
             tx->quote_name(stores_.schema().name()));
    EXPECT_EQ(tx->exec_params("SELECT 1 FROM dlm_locks WHERE resource = $1 "
                              "FOR UPDATE",
                              key(id).key)
                  .size(),
              1U);
    return tx;
  }

  ClientStores stores_;
  std::unique_ptr<PostgresStore> store_;
  const std::string scope_ = "DC#f#batchfn#";
};

TEST_F(PgBatchFunctionsTest, AReleaseBatchAnswersEachKeyInArgumentOrder) {
  hold("b", "tb");
  hold("a", "ta");
  hold("c", "tc");
  // Not in key order, and "c" with a token that never held it.
  EXPECT_EQ(releaseEach({{"b", "tb"}, {"c", "wrong"}, {"a", "ta"}}),
            (Answers{"released", "lost", "released"}));
  EXPECT_FALSE(held("a"));
  EXPECT_FALSE(held("b"));
  EXPECT_TRUE(held("c"));
  // Released already by this token: released again, as a retry after a
  // lost reply hears it.
  EXPECT_EQ(releaseEach({{"a", "ta"}, {"c", "tc"}}),
            (Answers{"released", "released"}));
}

TEST_F(PgBatchFunctionsTest, AnExtendBatchAnswersEachKeyInArgumentOrder) {
  hold("b", "tb");
  hold("a", "ta");
  EXPECT_EQ(extendEach({{"b", "tb"}, {"a", "other"}, {"a", "ta"}}),
            (Answers{"extended", "lost", "extended"}));
}

TEST_F(PgBatchFunctionsTest, ARowLockedElsewhereIsLeftToTheSingleCallAtOnce) {
  hold("a", "ta");
  hold("b", "tb");
  hold("c", "tc");
  auto tx = lockRow("b");
  EXPECT_EQ(extendEach({{"a", "ta"}, {"b", "tb"}, {"c", "tc"}}),
            (Answers{"extended", "single", "extended"}));
  EXPECT_EQ(releaseEach({{"a", "ta"}, {"b", "tb"}, {"c", "tc"}}),
            (Answers{"released", "single", "released"}));
  tx->abort();
  EXPECT_TRUE(held("b"));
  EXPECT_EQ(releaseEach({{"b", "tb"}}), (Answers{"released"}));
}

}  // namespace
}  // namespace dlm::test
