// Array literals (built on the client, parsed by the server) and the
// server's key-prefix ranges (dlm_prefix_end).
#include "postgres/pg_array.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "postgres/pg_migrate.h"
#include "support/pg_test_support.h"

namespace dlm::test {
namespace {

using internal::bigintArrayLiteral;
using internal::textArrayLiteral;

TEST(TextArrayLiteral, QuotesEveryElementAndEscapesQuotesAndBackslashes) {
  EXPECT_EQ(textArrayLiteral({}), "{}");
  EXPECT_EQ(textArrayLiteral({"a"}), R"({"a"})");
  EXPECT_EQ(textArrayLiteral({"a", "b.c"}), R"({"a","b.c"})");
  EXPECT_EQ(textArrayLiteral({R"(x"y)"}), R"({"x\"y"})");
  EXPECT_EQ(textArrayLiteral({R"(x\y)"}), R"({"x\\y"})");
  EXPECT_EQ(textArrayLiteral({R"(\")"}), R"({"\\\""})");
  EXPECT_EQ(textArrayLiteral({""}), R"({""})");
}

TEST(TextArrayLiteral, ServerParsesItBackToTheSameStrings) {
  const std::vector<std::string> items{"plain",
                                       "DC#farm#client#a.b.c",
                                       "with \"quotes\"",
                                       R"(back\slash)",
                                       R"(\")",
                                       "{braces}",
                                       "com,ma",
                                       "NULL",
                                       "null",
                                       "  spaced  ",
                                       "",
                                       "tab\there",
                                       "new\nline",
                                       "é ünïcödé ✓",
                                       "'single'",
                                       "$1"};
  std::vector<std::string_view> views(items.begin(), items.end());
  auto admin = adminConnection();
  pqxx::nontransaction tx(*admin);
  // unnest WITH ORDINALITY keeps the order the literal had.
  const pqxx::result r = tx.exec_params(
      "SELECT u.v, u.v IS NULL FROM unnest($1::text[]) WITH ORDINALITY AS "
      "u(v, n) ORDER BY u.n",
      textArrayLiteral(views));
  ASSERT_EQ(r.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_FALSE(r[i][1].as<bool>()) << "element " << i << " came back NULL";
    EXPECT_EQ(r[i][0].as<std::string>(), items[i]) << "element " << i;
  }
}

TEST(BigintArrayLiteral, ServerParsesItBackToTheSameNumbers) {
  EXPECT_EQ(bigintArrayLiteral({}), "{}");
  EXPECT_EQ(bigintArrayLiteral({1, -2, 3}), "{1,-2,3}");
  const std::vector<std::int64_t> items{0, 4294967295, -1,
                                        9223372036854775807LL};
  auto admin = adminConnection();
  pqxx::nontransaction tx(*admin);
  const pqxx::result r = tx.exec_params(
      "SELECT u.v FROM unnest($1::bigint[]) WITH ORDINALITY AS u(v, n) "
      "ORDER BY u.n",
      bigintArrayLiteral(items));
  ASSERT_EQ(r.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(r[i][0].as<std::int64_t>(), items[i]);
  }
}

// dlm_prefix_end(p) of a migrated schema, nullopt for NULL.
class PrefixEnd {
 public:
  PrefixEnd() { internal::applyPostgresMigrations(schema_.options()); }
  std::optional<std::string> operator()(const std::string& prefix) {
    pqxx::nontransaction tx(schema_.admin());
    const pqxx::result r = tx.exec_params(
        "SELECT " + tx.quote_name(schema_.name()) + ".dlm_prefix_end($1)",
        prefix);
    if (r[0][0].is_null()) return std::nullopt;
    return r[0][0].as<std::string>();
  }
  pqxx::connection& admin() { return schema_.admin(); }

 private:
  FreshSchema schema_;
};

TEST(PrefixEnd, IncrementsTheLastAsciiByteAndDropsTrailingNonAscii) {
  PrefixEnd end;
  EXPECT_EQ(end(""), std::nullopt);
  EXPECT_EQ(end("DC#f#c#"), std::optional<std::string>("DC#f#c$"));
  EXPECT_EQ(end("a.b"), std::optional<std::string>("a.c"));
  EXPECT_EQ(end("x~"), std::optional<std::string>("x\x7f"));
  EXPECT_EQ(end("ab\x7f"), std::optional<std::string>("ac"));
  EXPECT_EQ(end("k#é"), std::optional<std::string>("k$"));
  EXPECT_EQ(end("éé"), std::nullopt);
}

TEST(PrefixEnd, BoundsEveryKeyWithThePrefixInByteOrder) {
  PrefixEnd end;
  const std::vector<std::string> prefixes{"k#a", "k#é", "x~", "k#a\x7f"};
  const std::vector<std::string> suffixes{
      "", ".b", "\x7f", "é", "✓✓", "\xf4\x8f\xbf\xbf"};  // U+10FFFF
  for (const auto& p : prefixes) {
    const auto bound = end(p);
    ASSERT_TRUE(bound.has_value()) << p;
    pqxx::nontransaction tx(end.admin());
    for (const auto& s : suffixes) {
      // Compared by the server in C collation, as the key column is.
      const pqxx::result r = tx.exec_params(
          "SELECT $1::text COLLATE \"C\" >= $2::text AND "
          "$1::text COLLATE \"C\" < $3::text",
          p + s, p, *bound);
      EXPECT_TRUE(r[0][0].as<bool>()) << "prefix '" << p << "' suffix '" << s
                                      << "' bound '" << *bound << "'";
    }
  }
}

}  // namespace
}  // namespace dlm::test
