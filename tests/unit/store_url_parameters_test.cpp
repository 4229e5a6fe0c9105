// dlm's own parameters in a PostgreSQL URL (dlm/store_url.h): taken out
// before libpq reads the string, in both of libpq's forms, and turned into
// the store's options; the LISTEN connection is the same string pointed at
// another host or port, as libpq itself reads it. No server needed.
#include <gtest/gtest.h>

#include <string>

#include "dlm/error.h"
#include "dlm/store_url.h"
#include "support/error_code.h"

#ifdef DLM_WITH_POSTGRES
#include "postgres/pg_conn.h"

namespace dlm {
namespace {

using test::errorOf;

// What libpq reads for `keyword` in `conninfo` ("<unset>" when nothing).
std::string libpqValue(const std::string& conninfo, const char* keyword) {
  const internal::ConnParams params = internal::ConnParams::parse(conninfo);
  return params.has(keyword) ? params.value(keyword) : "<unset>";
}

TEST(StoreUrlParameters, AreTakenOutOfAUriQuery) {
  const ParsedStoreUrl parsed = parseStoreUrl(
      "postgresql://app@bouncer:6432/orders?sslmode=disable&dlm_pooler_safe="
      "true&connect_timeout=3&dlm_listen_port=5432");
  EXPECT_EQ(parsed.kind, StoreKind::POSTGRES);
  EXPECT_EQ(parsed.location,
            "postgresql://app@bouncer:6432/orders?sslmode=disable&connect_"
            "timeout=3");
  EXPECT_TRUE(parsed.poolerSafe);
  EXPECT_EQ(parsed.synchronousReplication, SynchronousReplication::NOT_CHECKED);
  // The LISTEN connection: the same server name, user, database and
  // settings, the direct port.
  EXPECT_EQ(libpqValue(parsed.listenConnection, "host"), "bouncer");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "port"), "5432");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "user"), "app");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "dbname"), "orders");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "connect_timeout"), "3");
}

TEST(StoreUrlParameters, AQueryOfOnlyDlmParametersLeavesNoQuery) {
  const ParsedStoreUrl parsed =
      parseStoreUrl("postgres://db/app?dlm_synchronous_replication=required");
  EXPECT_EQ(parsed.location, "postgres://db/app");
  EXPECT_FALSE(parsed.poolerSafe);
  EXPECT_TRUE(parsed.listenConnection.empty());
  EXPECT_EQ(parsed.synchronousReplication, SynchronousReplication::REQUIRED);
}

TEST(StoreUrlParameters, AreTakenOutOfAKeywordString) {
  const ParsedStoreUrl parsed = parseStoreUrl(
      "host=bouncer port=6432 dlm_pooler_safe = on dbname='my app' "
      "dlm_listen_host='db \\'one\\'' dlm_listen_port=5433 "
      "dlm_synchronous_replication=warn");
  EXPECT_EQ(parsed.location.find("dlm_"), std::string::npos) << parsed.location;
  EXPECT_EQ(libpqValue(parsed.location, "host"), "bouncer");
  EXPECT_EQ(libpqValue(parsed.location, "port"), "6432");
  EXPECT_EQ(libpqValue(parsed.location, "dbname"), "my app");
  EXPECT_TRUE(parsed.poolerSafe);
  EXPECT_EQ(parsed.synchronousReplication, SynchronousReplication::WARN);
  EXPECT_EQ(libpqValue(parsed.listenConnection, "host"), "db 'one'");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "port"), "5433");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "dbname"), "my app");
}

TEST(StoreUrlParameters, ListenHostAloneKeepsThePortsOfAMultiHostUri) {
  const ParsedStoreUrl parsed = parseStoreUrl(
      "postgresql://a:6432,b:6432/app?target_session_attrs=read-write&dlm_"
      "pooler_safe=1&dlm_listen_host=%2Fvar%2Frun%2Fpg,c");
  EXPECT_EQ(libpqValue(parsed.location, "host"), "a,b");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "host"), "/var/run/pg,c");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "port"), "6432,6432");
  EXPECT_EQ(libpqValue(parsed.listenConnection, "target_session_attrs"),
            "read-write");
}

TEST(StoreUrlParameters, FlagsTakeLibpqsSpellingsOfTrueAndFalse) {
  for (const char* yes : {"true", "1", "on", "yes", "TRUE", "On"}) {
    EXPECT_TRUE(parseStoreUrl(std::string("dbname=a dlm_pooler_safe=") + yes)
                    .poolerSafe)
        << yes;
  }
  for (const char* no : {"false", "0", "off", "no", "False"}) {
    EXPECT_FALSE(
        parseStoreUrl(std::string("dbname=a dlm_pooler_safe=") + no).poolerSafe)
        << no;
  }
  EXPECT_EQ(parseStoreUrl("dbname=a dlm_synchronous_replication=not_checked")
                .synchronousReplication,
            SynchronousReplication::NOT_CHECKED);
}

TEST(StoreUrlParameters, UnknownOnesAndBadValuesAreRefusedWithoutThePassword) {
  for (const char* url :
       {"postgresql://u:secretpw@h/db?dlm_pooler_safe=maybe",
        "postgresql://u:secretpw@h/db?dlm_poolersafe=true",
        "host=h password=secretpw dlm_synchronous_replication=always",
        "host=h password=secretpw dlm_listen_host='x",
        "postgresql://u:secretpw@h/db?dlm_listen_port=5432&bogus=1",
        // A port libpq would only refuse when it connects (wake-ups off).
        "postgresql://u:secretpw@h/db?dlm_listen_port=abc",
        "host=h password=secretpw dlm_listen_port=0",
        "host=h password=secretpw dlm_listen_port=65536",
        "host=h password=secretpw dlm_listen_port=-1"}) {
    SCOPED_TRACE(url);
    const DLMException e = errorOf([&] { parseStoreUrl(url); });
    EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
    EXPECT_EQ(std::string(e.what()).find("secretpw"), std::string::npos)
        << e.what();
    EXPECT_EQ(errorOf([&] { openStore(url); }).code(),
              ErrorCode::INVALID_ARGUMENT);
  }
}

TEST(StoreUrlParameters, OpenStoreAcceptsThemAndDescribesTheServer) {
  const std::string url =
      "postgresql://app@bouncer:6432/orders?dlm_pooler_safe=true&dlm_listen_"
      "port=5432";
  EXPECT_EQ(openStore(url)->name(), "postgres");
  EXPECT_EQ(describeStoreUrl(url), "postgresql://app@bouncer:6432/orders");
}

TEST(StoreUrlParameters, SqlitePathsAreNotParsedForThem) {
  const ParsedStoreUrl parsed = parseStoreUrl("sqlite:a?dlm_pooler_safe=1");
  EXPECT_EQ(parsed.kind, StoreKind::SQLITE);
  EXPECT_EQ(parsed.location, "a?dlm_pooler_safe=1");
  EXPECT_FALSE(parsed.poolerSafe);
}

}  // namespace
}  // namespace dlm
#endif
