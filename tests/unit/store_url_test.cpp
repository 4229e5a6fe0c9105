// Naming a database (dlm/store_url.h): every accepted form, every refused
// one, and no password in any message. Opens no database: openStore creates
// stores without connecting.
#include "dlm/store_url.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/redact.h"
#include "dlm/dlm.h"
#include "dlm/error.h"
#include "support/error_code.h"
#include "support/recorded_events.h"

namespace dlm {
namespace {

using test::errorOf;

constexpr const char* kSecret = "secretpw";

// The variables that pick PostgreSQL as the default, cleared for a test and
// restored after it (scripts/test.sh sets them for the whole run).
class ServerVariables : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {
      "DLM_DATABASE_URL", "PGHOST", "PGHOSTADDR", "PGDATABASE", "PGSERVICE"};
  void SetUp() override {
    for (const char* name : kNames) {
      const char* value = std::getenv(name);
      saved_.push_back(value ? std::optional<std::string>(value)
                             : std::nullopt);
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (std::size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i]) {
        ::setenv(kNames[i], saved_[i]->c_str(), 1);
      } else {
        ::unsetenv(kNames[i]);
      }
    }
  }

 private:
  std::vector<std::optional<std::string>> saved_;
};

// The refusal of `url`: INVALID_ARGUMENT, naming the accepted forms, never
// the password.
void expectRefused(const std::string& url) {
  SCOPED_TRACE(url);
  const DLMException e = errorOf([&] { parseStoreUrl(url); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
  const std::string message = e.what();
  EXPECT_NE(message.find("sqlite:PATH"), std::string::npos) << message;
  EXPECT_NE(message.find("postgresql://"), std::string::npos) << message;
  EXPECT_EQ(message.find(kSecret), std::string::npos) << message;
  const DLMException opened = errorOf([&] { openStore(url); });
  EXPECT_EQ(opened.code(), ErrorCode::INVALID_ARGUMENT);
  EXPECT_EQ(std::string(opened.what()).find(kSecret), std::string::npos);
}

TEST(ParseStoreUrl, SqliteNeedsItsPrefixAndTakesPathsAndMemory) {
  for (const auto& [url, path] :
       std::vector<std::pair<std::string, std::string>>{
           {"sqlite:/var/lib/app/locks.sqlite", "/var/lib/app/locks.sqlite"},
           {"sqlite:locks.sqlite", "locks.sqlite"},
           {"sqlite:///var/lib/app/locks.sqlite", "/var/lib/app/locks.sqlite"},
           {"sqlite:/tmp/a=b.sqlite", "/tmp/a=b.sqlite"},
           {"sqlite::memory:", ":memory:"}}) {
    const ParsedStoreUrl parsed = parseStoreUrl(url);
    EXPECT_EQ(parsed.kind, StoreKind::SQLITE) << url;
    EXPECT_EQ(parsed.location, path) << url;
  }
#ifdef DLM_WITH_SQLITE
  EXPECT_EQ(openStore("sqlite::memory:")->name(), "sqlite");
#endif
}

TEST(ParseStoreUrl, RefusesBareWordsPathsAndUnknownSchemes) {
  for (const char* url :
       {"dlm.sqlite", "/tmp/locks.sqlite", "./locks", "locks",
        "mysql://u:secretpw@h/db", "POSTGRESQL://u:secretpw@h/db",
        "postgresql:/u:secretpw@h/db", "sqlite:", "sqlite://"}) {
    expectRefused(url);
  }
}

TEST(ParseStoreUrl, ABareWordIsToldAboutTheSqlitePrefix) {
  const std::string message =
      errorOf([] { parseStoreUrl("dlm.sqlite"); }).what();
  EXPECT_NE(message.find("sqlite:dlm.sqlite"), std::string::npos) << message;
}

TEST(ParseStoreUrl, RefusesANulByteInsteadOfCuttingThePathShort) {
  expectRefused(std::string("sqlite:/tmp/a\0b.sqlite", 22));
  expectRefused(std::string("sqlite:\0", 8));
  expectRefused(std::string("postgresql://u:secretpw@h/db\0x", 30));
}

#ifdef DLM_WITH_POSTGRES

TEST(ParseStoreUrl, TakesPostgresUrisAsTheyAre) {
  for (const char* url :
       {"postgresql://app@db/orders", "postgres://app@db:5433/orders",
        "postgresql://",
        "postgresql://a,b/orders?target_session_attrs=read-write",
        "postgresql://app:secretpw@[::1]:5432/orders"}) {
    const ParsedStoreUrl parsed = parseStoreUrl(url);
    EXPECT_EQ(parsed.kind, StoreKind::POSTGRES) << url;
    EXPECT_EQ(parsed.location, url);
    EXPECT_EQ(openStore(url)->name(), "postgres") << url;
  }
}

TEST(ParseStoreUrl, TakesLibpqKeywordStrings) {
  for (const char* conninfo :
       {"host=127.0.0.1 port=5432 dbname=app", "dbname=app",
        "host=db user=app password=secretpw", "host = db  dbname = 'my app'"}) {
    const ParsedStoreUrl parsed = parseStoreUrl(conninfo);
    EXPECT_EQ(parsed.kind, StoreKind::POSTGRES) << conninfo;
    EXPECT_EQ(parsed.location, conninfo);
    EXPECT_EQ(openStore(conninfo)->name(), "postgres") << conninfo;
  }
}

TEST(ParseStoreUrl, WhatLibpqCannotParseIsInvalidArgumentNotAConnectError) {
  for (const char* url :
       {"postgresql://u:secretpw@[::1", "postgresql://u:secretpw@h/db?bogus=1",
        "host=h password=secretpw bogus=1", "host=h password=secretpw dbname",
        "password='secretpw"}) {
    expectRefused(url);
  }
}

TEST_F(ServerVariables, PgVariablesPickPostgresWhenNoUrlIsGiven) {
  ::setenv("PGHOST", "db.example", 1);
  ::setenv("PGDATABASE", "orders", 1);
  const DefaultStoreUrl chosen = defaultStoreUrl();
  EXPECT_EQ(chosen.url, "postgresql://");
  EXPECT_EQ(chosen.origin, "PGHOST, PGDATABASE");
  EXPECT_EQ(parseStoreUrl("").kind, StoreKind::POSTGRES);
  EXPECT_EQ(openStore("")->name(), "postgres");
  // What libpq will use, from the variables.
  const std::string shown = describeStoreUrl("");
  EXPECT_NE(shown.find("@db.example"), std::string::npos) << shown;
  EXPECT_NE(shown.find("/orders"), std::string::npos) << shown;

  ::unsetenv("PGHOST");
  ::unsetenv("PGDATABASE");
  ::setenv("PGSERVICE", "locks", 1);
  EXPECT_EQ(defaultStoreUrl().origin, "PGSERVICE");
}

TEST(DescribeStoreUrl, ShowsWhereLibpqGoesWithoutThePassword) {
  EXPECT_EQ(describeStoreUrl("postgresql://app:secretpw@db:5433/orders"),
            "postgresql://app@db:5433/orders");
  EXPECT_EQ(describeStoreUrl("host=db port=5432 user=app password=secretpw "
                             "dbname=orders"),
            "postgresql://app@db:5432/orders");
  EXPECT_EQ(describeStoreUrl("host=a,b port=1,2 user=app dbname=orders"),
            "postgresql://app@a:1,b:2/orders");
  EXPECT_EQ(describeStoreUrl("host=::1 port=5432 user=app dbname=orders"),
            "postgresql://app@[::1]:5432/orders");
  EXPECT_EQ(
      describeStoreUrl("host=/run/postgresql port=5432 user=app dbname=d"),
      "postgresql://app@/d?host=/run/postgresql");
  // A dbname may hold a whole connection string; libpq expands it.
  const std::string nested = describeStoreUrl(
      "user=app host=db port=1 dbname='postgresql://u:secretpw@h/x'");
  EXPECT_EQ(nested.find(kSecret), std::string::npos) << nested;
}

// Passwords made of the characters users put in them (unencoded '/', '@',
// ':', '?', '=', '&', quotes, spaces, '%'), around a marker, in every place
// a password goes: a URI's user-info, a password keyword (spelt right or
// wrong), a URI query parameter. Whether the string is accepted or
// refused, neither describeStoreUrl nor any message shows the marker, nor
// any event of a manager on the store (a server that refuses the
// connection).
TEST(DescribeStoreUrl, NoPlacementOfAPasswordReachesAMessage) {
  constexpr const char* kMarker = "Q7xMARKx9";
  const std::string specials = "/@:?=&' %#+,;";
  std::mt19937 random(20261127);
  const auto pick = [&](const std::string& from) {
    return from[random() % from.size()];
  };
  const auto password = [&] {
    std::string p;
    for (int i = random() % 4; i > 0; --i) p += pick(specials + "ab9");
    p += kMarker;
    for (int i = random() % 4; i > 0; --i) p += pick(specials + "cd8");
    return p;
  };
  const std::vector<std::string> keywords = {"password", "pasword", "passwd",
                                             "passwrd", "PASSWORD"};
  int refused = 0;
  int eventRuns = 0;
  std::size_t eventsSeen = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string pw = password();
    std::string url;
    switch (random() % 7) {
      case 0:
        url = "postgresql://app:" + pw + "@127.0.0.1:1/db";
        break;
      case 1:
        url = "postgres://app:" + pw + "@h1:1,h2:2/db?sslmode=disable";
        break;
      case 2:
        url = "host=127.0.0.1 port=1 " + keywords[random() % keywords.size()] +
              "=" + pw + " dbname=db";
        break;
      case 3:
        url = "postgresql://app@127.0.0.1:1/db?" +
              keywords[random() % keywords.size()] + "=" + pw;
        break;
      // With dlm's own parameters, right, misspelt or with a bad value.
      case 4:
        url = "postgresql://app:" + pw +
              "@127.0.0.1:1/db?dlm_listen_port=5432&dlm_pooler_safe=true";
        break;
      case 5:
        url = "host=127.0.0.1 port=1 password=" + pw + " dlm_listen_hots=h";
        break;
      default:
        url = "postgresql://app:" + pw + "@127.0.0.1:1/db?dlm_listen_port=x";
        break;
    }
    std::string shown;
    try {
      shown = describeStoreUrl(url);
      std::shared_ptr<LockStore> store = openStore(url);
      // The events of a manager that cannot reach the server (a closed
      // port on this host: refused at once), for some of the strings.
      if (eventRuns < 40 && url.find("127.0.0.1") != std::string::npos) {
        ++eventRuns;
        auto events = std::make_shared<test::RecordedEvents>();
        LockConfiguration config;
        config.storeRetries = 0;
        auto m = DistributedLockManager::builder()
                     .clientId("fuzz")
                     .store(store)
                     .configuration(config)
                     .events(events)
                     .build();
        try {
          m->initialize();
        } catch (const DLMException& e) {
          shown += e.what();
        }
        for (const LockEvent& e : events->all()) shown += e.message;
        eventsSeen += events->all().size();
      }
    } catch (const DLMException& e) {
      ++refused;
      shown += e.what();
    }
    ASSERT_EQ(shown.find(kMarker), std::string::npos)
        << "from " << url << ": " << shown;
  }
  EXPECT_GT(eventsSeen, 0U) << "no event was looked at";
  // Both paths were taken.
  EXPECT_GT(refused, 100);
  EXPECT_LT(refused, 1900);
}

TEST(StoreUrlHasPassword, SaysWhetherTheUrlItselfCarriesOne) {
  EXPECT_TRUE(storeUrlHasPassword("postgresql://app:s3cret@db/orders"));
  EXPECT_TRUE(storeUrlHasPassword("host=db password=s3cret dbname=orders"));
  EXPECT_TRUE(storeUrlHasPassword("postgresql://app@db/orders?password=x"));
  EXPECT_FALSE(storeUrlHasPassword("postgresql://app@db/orders"));
  EXPECT_FALSE(storeUrlHasPassword("host=db dbname=orders"));
  EXPECT_FALSE(storeUrlHasPassword("postgresql://"));
  EXPECT_EQ(test::codeOf([] { storeUrlHasPassword("mysql://a:b@h/d"); }),
            ErrorCode::INVALID_ARGUMENT);
}
#endif  // DLM_WITH_POSTGRES

TEST(StoreUrlHasPassword, SqliteNeverCarriesOne) {
  EXPECT_FALSE(storeUrlHasPassword("sqlite:locks.sqlite"));
  EXPECT_FALSE(storeUrlHasPassword("sqlite::memory:"));
}

// openStore("") names the database as dlmctl does: DLM_DATABASE_URL first.
TEST_F(ServerVariables, DlmDatabaseUrlComesBeforeThePgVariables) {
  ::setenv("PGHOST", "db.example", 1);  // names a server, but comes second
  ::setenv("DLM_DATABASE_URL", "sqlite:/var/lib/app/locks.sqlite", 1);
  const DefaultStoreUrl chosen = defaultStoreUrl();
  EXPECT_EQ(chosen.url, "sqlite:/var/lib/app/locks.sqlite");
  EXPECT_EQ(chosen.origin, "DLM_DATABASE_URL");
  const ParsedStoreUrl parsed = parseStoreUrl("");
  EXPECT_EQ(parsed.kind, StoreKind::SQLITE);
  EXPECT_EQ(parsed.location, "/var/lib/app/locks.sqlite");
  EXPECT_EQ(openStore("")->name(), "sqlite");
  ::setenv("DLM_DATABASE_URL", "", 1);  // set but empty names nothing
  EXPECT_NE(defaultStoreUrl().origin, "DLM_DATABASE_URL");
}

TEST_F(ServerVariables, WithoutPgVariablesTheDefaultIsTheSqliteFile) {
  ::setenv("PGHOST", "", 1);  // set but empty names nothing
  const DefaultStoreUrl chosen = defaultStoreUrl();
  EXPECT_EQ(chosen.url, kDefaultStoreUrl);
  EXPECT_EQ(chosen.origin, "default");
  const ParsedStoreUrl parsed = parseStoreUrl("");
  EXPECT_EQ(parsed.kind, StoreKind::SQLITE);
  EXPECT_EQ(parsed.location, "dlm.sqlite");
}

TEST(DescribeStoreUrl, ShowsSqliteFilesAsAbsolutePaths) {
  EXPECT_EQ(describeStoreUrl("sqlite:/var/lib/../lib/locks.sqlite"),
            "sqlite:/var/lib/locks.sqlite");
  const std::string relative = describeStoreUrl("sqlite:locks.sqlite");
  EXPECT_EQ(relative.rfind("sqlite:/", 0), 0u) << relative;
  EXPECT_NE(relative.find("/locks.sqlite"), std::string::npos) << relative;
  EXPECT_EQ(describeStoreUrl("sqlite::memory:"), "sqlite::memory:");
}

TEST(OpenStore, RefusesAPostgresSchemaForSqlite) {
  const DLMException e = errorOf([] { openStore("sqlite::memory:", "dlm"); });
  EXPECT_EQ(e.code(), ErrorCode::INVALID_ARGUMENT);
}

// A message that quotes a long key (a key may have 8 KB): redacted in one
// pass (std::regex, used before, recursed per character and overflowed the
// stack on such text), with what follows it still redacted.
TEST(RedactSecrets, LongTextIsScannedNotBacktracked) {
  const std::string key(1 << 20, 'k');
  EXPECT_EQ(internal::redactSecrets(key), key);
  EXPECT_EQ(internal::redactSecrets(key + ":" + key + " postgresql://u:pw@h"),
            key + ":" + key + " postgresql://u:***@h");
  EXPECT_EQ(internal::redactSecrets("password=" + key + " x"),
            "password=*** x");
}

TEST(RedactSecrets, HidesPasswordsOfAnySchemeAndKeyword) {
  EXPECT_EQ(internal::redactSecrets("mysql://u:secretpw@h/db"),
            "mysql://u:***@h/db");
  EXPECT_EQ(internal::redactSecrets("postgresql:/u:secretpw@h/db"),
            "postgresql:/u:***@h/db");
  EXPECT_EQ(internal::redactSecrets("host=h password=secretpw user=u"),
            "host=h password=*** user=u");
  EXPECT_EQ(internal::redactSecrets("postgresql://u@h/db?password=secretpw"),
            "postgresql://u@h/db?password=***");
  EXPECT_EQ(internal::redactSecrets("sqlite:/tmp/locks.sqlite"),
            "sqlite:/tmp/locks.sqlite");
  EXPECT_EQ(internal::redactSecrets("a PASSWORD = 'it\\'s' b"),
            "a PASSWORD = *** b");
  EXPECT_EQ(internal::redactSecrets("x:y z:u:p@h and 9db:u:s:t@h"),
            "x:y z:u:***@h and 9db:u:***@h");
}

}  // namespace
}  // namespace dlm
