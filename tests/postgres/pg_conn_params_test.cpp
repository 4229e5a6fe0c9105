// Connection parameters: the user's conninfo, plus defaults that never
// override it nor break a connect (no server needed).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

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

std::string refusal(const std::string& conninfo) {
  try {
    internal::ConnParams::parse(conninfo);
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << conninfo;
  return "";
}

// No part of a password reaches a message, wherever the user put it: a
// '/' or a second '@' unencoded in a URI's password, a misspelt keyword,
// an unknown query parameter, a bare word.
TEST(ConnParams, NoMalformedStringIsQuotedBackWithItsSecret) {
  for (const auto& [conninfo, secret] :
       std::vector<std::pair<std::string, std::string>>{
           {"postgresql://u:Xk/9v+Qz=@127.0.0.1:27399/db", "Xk"},
           {"postgresql://u:Xk/9v+Qz=@127.0.0.1:27399/db", "9v+Qz="},
           {"postgresql://u:Mk@rk3r9@127.0.0.1:27399/db", "rk3r9"},
           {"POSTGRES://u:Mk@rk3r9@h/db", "rk3r9"},
           {"host=127.0.0.1 port=27399 pasword=S3cret", "S3cret"},
           {"host=h passwrd='S3 cret'", "S3 cret"},
           {"postgresql://u@h:1/db?passwd=S3cret", "S3cret"},
           {"host=h S3cret", "S3cret"}}) {
    const std::string message = refusal(conninfo);
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_NE(message.find("not shown"), std::string::npos) << message;
  }
  // What helps the user stays: the misspelt keyword, the encoding to use.
  EXPECT_NE(refusal("host=h pasword=S3cret").find("\"pasword\""),
            std::string::npos);
  EXPECT_NE(refusal("postgresql://u:a/b@h/db").find("%2F"), std::string::npos);
  // Percent-encoded, the same password is fine.
  EXPECT_EQ(internal::ConnParams::parse("postgresql://u:Xk%2F9v@h/db")
                .value("password"),
            "Xk/9v");
  EXPECT_EQ(internal::ConnParams::parse("postgresql://u@h/db?options=a@b")
                .value("options"),
            "a@b");
}

}  // namespace
}  // namespace dlm::test
