// Connection parameters: the user's conninfo, plus defaults that never
// override it nor break a connect (no server needed).
#include <gtest/gtest.h>

#include <string>

#include "dlm/error.h"
#include "postgres/pg_conn.h"

namespace dlm::test {
namespace {

std::string valueOf(const internal::ConnParams& p, const std::string& key) {
  for (const auto& [k, v] : p.items()) {
    if (k == key) return v;
  }
  return "<unset>";
}

TEST(ConnParams, KeepsOnlyWhatTheUserSetAndAcceptsUris) {
  const auto p =
      internal::ConnParams::parse("postgresql://app@db.example:6543/orders");
  EXPECT_EQ(valueOf(p, "host"), "db.example");
  EXPECT_EQ(valueOf(p, "port"), "6543");
  EXPECT_EQ(valueOf(p, "dbname"), "orders");
  EXPECT_EQ(valueOf(p, "user"), "app");
  EXPECT_EQ(valueOf(p, "sslmode"), "<unset>");
  EXPECT_TRUE(internal::ConnParams::parse("").items().empty());
}

TEST(ConnParams, DefaultsNeverOverrideTheUser) {
  auto p = internal::ConnParams::parse("host=h keepalives_idle=99");
  p.setDefault("keepalives_idle", "10");
  p.setDefault("keepalives", "1");
  EXPECT_EQ(valueOf(p, "keepalives_idle"), "99");
  EXPECT_EQ(valueOf(p, "keepalives"), "1");
  p.set("keepalives_idle", "7");
  EXPECT_EQ(valueOf(p, "keepalives_idle"), "7");
}

TEST(ConnParams, DefaultsThisLibpqDoesNotKnowAreLeftOut) {
  auto p = internal::ConnParams::parse("host=h");
  p.setDefault("no_such_libpq_option", "1");
  EXPECT_EQ(valueOf(p, "no_such_libpq_option"), "<unset>");
}

TEST(ConnParams, ValueIsWhatTheUserSet) {
  const auto p = internal::ConnParams::parse("postgresql://a:1,b:2/db");
  EXPECT_EQ(p.value("host"), "a,b");
  EXPECT_EQ(p.value("port"), "1,2");
  EXPECT_EQ(p.value("user"), "");
}

TEST(ConnParams, MalformedIsInvalidArgument) {
  try {
    internal::ConnParams::parse("host=h nonsense");
    ADD_FAILURE() << "no exception";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
    EXPECT_FALSE(e.transient());
  }
}

}  // namespace
}  // namespace dlm::test
