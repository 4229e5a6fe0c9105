// schema/postgres.sql versus migrations/postgres/, applying migrations from
// code, and the cost of one acquire and one release as the server counts it.
#include <algorithm>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "schema/migration.h"
#include "postgres/pg_migrate.h"
#include "support/pg_test_support.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

// How many migrations the library ships (each records one version row).
int migrationCount() {
  return static_cast<int>(internal::postgresMigrations().size());
}

int versionRows(FreshSchema& schema) {
  pqxx::nontransaction tx(schema.admin());
  return tx
      .exec("SELECT count(*) FROM " + schema.admin().quote_name(schema.name()) +
            ".dlm_schema_version")[0][0]
      .as<int>();
}

void replaceAll(std::string& s, const std::string& from,
                const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// What a DBA would diff between two schemas, one line per object, with the
// schema's name replaced by <schema>.
std::vector<std::string> catalogOf(pqxx::connection& admin,
                                   const std::string& schema) {
  pqxx::nontransaction tx(admin);
  std::vector<std::string> lines;
  auto add = [&](const std::string& kind, const pqxx::result& r) {
    for (const auto& row : r) {
      std::string line = kind;
      for (const auto& f : row) {
        line += " | ";
        line += f.is_null() ? "NULL" : f.c_str();
      }
      replaceAll(line, schema, "<schema>");
      lines.push_back(line);
    }
  };
  add("column",
      tx.exec_params("SELECT table_name, column_name, ordinal_position, "
                     "data_type, column_default, is_nullable, collation_name "
                     "FROM information_schema.columns WHERE table_schema = $1 "
                     "ORDER BY 1, 3",
                     schema));
  add("index", tx.exec_params("SELECT indexname, indexdef FROM pg_indexes "
                              "WHERE schemaname = $1 ORDER BY 1",
                              schema));
  add("relation",
      tx.exec_params("SELECT c.relname, c.relkind, c.reloptions::text, "
                     "c.relacl::text FROM pg_class c JOIN pg_namespace n ON "
                     "n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY 1",
                     schema));
  add("constraint",
      tx.exec_params("SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) "
                     "FROM pg_constraint k JOIN pg_class c ON c.oid = "
                     "k.conrelid JOIN pg_namespace n ON n.oid = k.connamespace "
                     "WHERE n.nspname = $1 ORDER BY 1, 2",
                     schema));
  add("function",
      tx.exec_params("SELECT p.proname, "
                     "pg_get_function_identity_arguments(p.oid), "
                     "pg_get_functiondef(p.oid), p.proacl::text FROM pg_proc p "
                     "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE "
                     "n.nspname = $1 ORDER BY 1, 2",
                     schema));
  // Function security and configuration explicitly (pg_get_functiondef
  // shows them too, but a diff of these lines is easier to read).
  add("function security",
      tx.exec_params("SELECT p.proname, p.prosecdef, p.provolatile, "
                     "p.proconfig::text, pg_get_userbyid(p.proowner) = "
                     "current_user FROM pg_proc p JOIN pg_namespace n ON "
                     "n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1",
                     schema));
  add("comment",
      tx.exec_params(
          "SELECT c.relname, a.attname, d.description FROM pg_description d "
          "JOIN pg_class c ON c.oid = d.objoid AND d.classoid = "
          "'pg_class'::regclass JOIN pg_namespace n ON n.oid = "
          "c.relnamespace LEFT JOIN pg_attribute a ON a.attrelid = c.oid "
          "AND a.attnum = d.objsubid AND d.objsubid > 0 WHERE n.nspname = $1 "
          "UNION ALL SELECT p.proname, pg_get_function_identity_arguments("
          "p.oid), d.description FROM pg_description d JOIN pg_proc p ON "
          "p.oid = d.objoid AND d.classoid = 'pg_proc'::regclass JOIN "
          "pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 "
          "ORDER BY 1, 2",
          schema));
  add("toast options",
      tx.exec_params("SELECT c.relname, t.reloptions::text FROM pg_class c "
                     "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN "
                     "pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname "
                     "= $1 ORDER BY 1",
                     schema));
  add("grant",
      tx.exec_params(
          "SELECT r.rolname, has_schema_privilege(r.rolname, $1, 'USAGE'), "
          "has_schema_privilege(r.rolname, $1, 'CREATE'), "
          "pg_has_role('dlm_admin', 'dlm_client', 'MEMBER') "
          "FROM pg_roles r WHERE r.rolname IN ('dlm_client', 'dlm_admin') "
          "ORDER BY 1",
          schema));
  add("config", tx.exec("SELECT name, value FROM " + admin.quote_name(schema) +
                        ".dlm_config ORDER BY 1"));
  add("fencing floor",
      tx.exec("SELECT id, floor_token FROM " + admin.quote_name(schema) +
              ".dlm_fencing_floor"));
  add("schema usage by dlm_client",
      tx.exec_params("SELECT has_schema_privilege('dlm_client', $1, 'USAGE')",
                     schema));
  // With the checksums: a schema applied from the file records each
  // migration's as the applier does, so schema status checks it for drift
  // (before, every row was "not recorded").
  add("version",
      tx.exec("SELECT version, description, compatible_from, checksum FROM " +
              admin.quote_name(schema) + ".dlm_schema_version ORDER BY 1"));
  // Sorted: rows that tie in a query's ORDER BY (two overloads of one
  // function) come in no fixed order.
  std::sort(lines.begin(), lines.end());
  return lines;
}

// -------------------------------------------------------------- catalog

TEST(PostgresSchema, SchemaFileAndMigrationsGiveTheSameCatalog) {
  FreshSchema fromFile;
  {
    pqxx::work tx(fromFile.admin());
    tx.exec("SET LOCAL search_path = " +
            fromFile.admin().quote_name(fromFile.name()));
    tx.exec("SET LOCAL dlm.client_role = 'dlm_client'");
    tx.exec("SET LOCAL dlm.admin_role = 'dlm_admin'");
    tx.exec(std::string(internal::postgresSchemaSql()));
    tx.commit();
  }
  FreshSchema fromMigrations;
  EXPECT_EQ(internal::applyPostgresMigrations(fromMigrations.options()),
            static_cast<int>(internal::postgresMigrations().size()));

  const auto a = catalogOf(fromFile.admin(), fromFile.name());
  const auto b = catalogOf(fromFile.admin(), fromMigrations.name());
  ASSERT_GE(a.size(), 20u) << "the catalog dump looks empty";
  for (const char* kind :
       {"column", "index", "relation", "constraint", "function",
        "function security", "comment", "toast options", "grant", "config",
        "fencing floor", "schema usage", "version"}) {
    bool found = false;
    for (const auto& line : a) found = found || line.rfind(kind, 0) == 0;
    EXPECT_TRUE(found) << "no " << kind << " lines in the dump";
  }
  // The lines of one side only, so a failure says what differs.
  for (const auto& line : a) {
    EXPECT_NE(std::find(b.begin(), b.end(), line), b.end())
        << "only from the schema file: " << line;
  }
  for (const auto& line : b) {
    EXPECT_NE(std::find(a.begin(), a.end(), line), a.end())
        << "only from the migrations: " << line;
  }
  EXPECT_EQ(a, b);
}

// The schema file creates no role nobody named: without the two settings
// it refuses before creating anything (until 1.0 it created dlm_client and
// dlm_admin, cluster-wide, behind the DBA's back).
TEST(PostgresSchema, TheSchemaFileRefusesUnnamedRolesBeforeCreatingAnything) {
  FreshSchema schema;
  pqxx::connection& admin = schema.admin();
  for (const char* settings :
       {"", "SET LOCAL dlm.client_role = 'dlm_client';",
        "SET LOCAL dlm.client_role = 'dlm_client'; "
        "SET LOCAL dlm.admin_role = 'dlm_client';"}) {
    SCOPED_TRACE(settings);
    std::string message;
    try {
      pqxx::work tx(admin);
      tx.exec("SET LOCAL search_path = " + admin.quote_name(schema.name()));
      if (*settings != '\0') tx.exec(settings);
      tx.exec(std::string(internal::postgresSchemaSql()));
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("dlm: "), std::string::npos) << message;
    const pqxx::row n = pqxx::nontransaction(admin).exec1(
        "SELECT count(*) FROM pg_class WHERE relnamespace = " +
        admin.quote(schema.name()) + "::regnamespace");
    EXPECT_EQ(n[0].as<long>(), 0) << "something was created";
  }
}

TEST(PostgresSchema, EveryTableColumnAndFunctionHasAComment) {
  FreshSchema schema;
  internal::applyPostgresMigrations(schema.options());
  pqxx::nontransaction tx(schema.admin());
  const pqxx::result missing = tx.exec_params(
      "SELECT c.relname || coalesce('.' || a.attname, '') FROM pg_class c "
      "JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_attribute "
      "a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
      "WHERE n.nspname = $1 AND c.relkind = 'r' AND "
      "col_description(c.oid, coalesce(a.attnum, 0)) IS NULL AND "
      "(a.attnum IS NOT NULL OR obj_description(c.oid, 'pg_class') IS NULL) "
      "UNION ALL SELECT c.relname FROM pg_class c JOIN pg_namespace n ON "
      "n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r' AND "
      "obj_description(c.oid, 'pg_class') IS NULL "
      "UNION ALL SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON "
      "n.oid = p.pronamespace WHERE n.nspname = $1 AND "
      "obj_description(p.oid, 'pg_proc') IS NULL",
      schema.name());
  std::vector<std::string> names;
  for (const auto& row : missing) names.push_back(row[0].c_str());
  EXPECT_TRUE(names.empty()) << ::testing::PrintToString(names);
}

TEST(PostgresSchema, ApplyingV3AgainByHandChangesNothing) {
  FreshSchema schema;
  internal::applyPostgresMigrations(schema.options());
  const auto before = catalogOf(schema.admin(), schema.name());
  {
    pqxx::work tx(schema.admin());
    tx.exec("SET LOCAL search_path = " +
            schema.admin().quote_name(schema.name()));
    tx.exec(std::string(internal::postgresMigrations().back().sql));
    tx.commit();
  }
  EXPECT_EQ(catalogOf(schema.admin(), schema.name()), before);
  EXPECT_EQ(versionRows(schema), migrationCount());
}

// ----------------------------------------------------------- migrations

TEST(PostgresMigrations, ApplyingTwiceAppliesNothingTheSecondTime) {
  FreshSchema schema;
  EXPECT_EQ(internal::postgresSchemaVersion(schema.options()), -1);
  EXPECT_EQ(internal::applyPostgresMigrations(schema.options()),
            migrationCount());
  EXPECT_EQ(internal::applyPostgresMigrations(schema.options()), 0);
  EXPECT_EQ(internal::postgresSchemaVersion(schema.options()),
            internal::latestVersion(internal::postgresMigrations()));
  PostgresStore store(schema.options());
  store.initialize(true);
  store.initialize(false);
  EXPECT_EQ(versionRows(schema), migrationCount());
}

TEST(PostgresMigrations, TwoThreadsMigratingAtOnceApplyOnce) {
  // A few rounds: the threads race for the first statement each time.
  for (int round = 0; round < 5; ++round) {
    FreshSchema schema;
    std::atomic<int> ready{0};
    int applied[2] = {-1, -1};
    std::string errors[2];
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        ++ready;
        while (ready < 2) std::this_thread::yield();
        try {
          applied[i] = internal::applyPostgresMigrations(schema.options());
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(errors[0], "");
    EXPECT_EQ(errors[1], "");
    // Each migration is applied by exactly one of them.
    EXPECT_EQ(applied[0] + applied[1], migrationCount()) << "round " << round;
    EXPECT_EQ(versionRows(schema), migrationCount());
  }
}

TEST(PostgresMigrations, TwoStoresInitializingWithMigrationsAtOnceBothSucceed) {
  FreshSchema schema;
  std::atomic<int> ready{0};
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      PostgresStore store(schema.options());
      ++ready;
      while (ready < 2) std::this_thread::yield();
      try {
        store.initialize(true);
      } catch (const DLMException& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(versionRows(schema), migrationCount());
}

// ----------------------------------------------------------- round trips

// A database of its own, so that pg_stat_database counts only our sessions.
class PrivateDatabase {
 public:
  PrivateDatabase()
      : admin_(adminConnection()), name_(uniqueName("dlm_test_db")) {
    execSql(*admin_, "CREATE DATABASE " + admin_->quote_name(name_));
    PostgresStoreOptions o;
    o.connection = "dbname=" + name_;
    internal::applyPostgresMigrations(o);
  }
  ~PrivateDatabase() {
    try {
      execSql(*admin_, "DROP DATABASE IF EXISTS " + admin_->quote_name(name_) +
                           " WITH (FORCE)");
    } catch (const std::exception& e) {
      // Leave it behind rather than crash the run.
      std::fprintf(stderr, "dropping database %s: %s\n", name_.c_str(),
                   e.what());
    }
  }

  // Committed transactions in this database, once every session in it has
  // ended and reported (a backend flushes its counts when it exits).
  std::int64_t settledCommits() {
    std::int64_t last = -1;
    int stable = 0;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      pqxx::nontransaction tx(*admin_);
      const pqxx::row r = tx.exec_params1(
          "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = $1), "
          "(SELECT xact_commit FROM pg_stat_database WHERE datname = $1)",
          name_);
      const auto sessions = r[0].as<std::int64_t>();
      const auto commits = r[1].as<std::int64_t>();
      stable = (sessions == 0 && commits == last) ? stable + 1 : 0;
      if (stable >= 3) return commits;
      last = commits;
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("pg_stat_database did not settle");
  }

  // Commits counted for a store session that warms up (connects, prepares
  // acquire and release once) and then runs `work`.
  std::int64_t commitsOf(const std::function<void(LockStore&)>& work) {
    const std::int64_t before = settledCommits();
    {
      PostgresStoreOptions o;
      o.connection = "dbname=" + name_;
      o.poolSize = 1;
      PostgresStore store(o);
      const StoreKey warm{"XDC#W#warm", {}, "", ""};
      const Holder holder{"h", 1};
      store.now();
      store.tryAcquire({warm, "o", "warm-token", 10s, holder});
      store.release(warm, "warm-token", dlm::LockMode::EXCLUSIVE);
      work(store);
      store.close();
    }
    return settledCommits() - before;
  }

 private:
  std::unique_ptr<pqxx::connection> admin_;
  std::string name_;
};

// Acquires n hierarchical keys (two ancestors each: three rows locked and
// created per call), releasing them when `release`.
void acquireMany(LockStore& store, int n, bool release,
                 const std::string& tag) {
  const Holder holder{"h", 1};
  for (int i = 0; i < n; ++i) {
    StoreKey key;
    key.key = fmt::format("XDC#R#{}{}.x.y", tag, i);
    key.ancestors = {fmt::format("XDC#R#{}{}", tag, i),
                     fmt::format("XDC#R#{}{}.x", tag, i)};
    key.descendantsBegin = key.key + ".";
    key.descendantsEnd = key.key + "/";
    const std::string token = fmt::format("tok-{}", i);
    ASSERT_TRUE(store.tryAcquire({key, "o", token, 10s, holder}).acquired);
    if (release) {
      ASSERT_TRUE(store.release(key, token, dlm::LockMode::EXCLUSIVE));
    }
  }
}

TEST(PostgresRoundTrips, OneTransactionPerAcquireAndPerRelease) {
  PrivateDatabase db;
  constexpr int kOps = 20;
  // Other sessions (autovacuum) may add commits to one measurement; they
  // never remove any, so a clean attempt shows the exact figure.
  std::vector<std::string> attempts;
  bool exact = false;
  for (int attempt = 0; attempt < 3 && !exact; ++attempt) {
    const std::string tag = fmt::format("a{}_", attempt);
    const auto base = db.commitsOf([](LockStore&) {});
    const auto acquires = db.commitsOf(
        [&](LockStore& s) { acquireMany(s, kOps, false, tag + "acq"); });
    const auto cycles = db.commitsOf(
        [&](LockStore& s) { acquireMany(s, kOps, true, tag + "cyc"); });
    const auto perAcquire = acquires - base;
    const auto perRelease = cycles - acquires;
    attempts.push_back(
        fmt::format("{} acquires: {} commits; {} releases: {} commits", kOps,
                    perAcquire, kOps, perRelease));
    exact = perAcquire == kOps && perRelease == kOps;
  }
  EXPECT_TRUE(exact) << "expected " << kOps << " commits each; got: "
                     << ::testing::PrintToString(attempts);
  std::printf("round trips: %s\n", attempts.back().c_str());
}

// ------------------------------------------------------------ schemaState

TEST(PostgresSchemaState, AFreshEmptySchemaIsNotPresent) {
  FreshSchema schema;
  PostgresStore store(schema.options());
  const SchemaState state = store.schemaState();  // no initialize() needed
  EXPECT_FALSE(state.present);
  EXPECT_TRUE(state.applied.empty());
  EXPECT_EQ(state.version(), 0);
  // Looking created nothing.
  pqxx::nontransaction tx(schema.admin());
  EXPECT_EQ(tx.exec_params("SELECT count(*) FROM pg_class c JOIN pg_namespace "
                           "n ON n.oid = c.relnamespace WHERE n.nspname = $1",
                           schema.name())[0][0]
                .as<int>(),
            0);
}

TEST(PostgresSchemaState, ReadsTheConfiguredSchemaOnly) {
  FreshSchema migrated;
  internal::applyPostgresMigrations(migrated.options());
  FreshSchema empty;
  EXPECT_FALSE(PostgresStore(empty.options()).schemaState().present);
  const SchemaState state = PostgresStore(migrated.options()).schemaState();
  EXPECT_TRUE(state.present);
  ASSERT_EQ(static_cast<int>(state.applied.size()), migrationCount());
  EXPECT_EQ(state.version(), migrationCount());
  EXPECT_EQ(state.applied.front().description, "create lock tables");
  // Only the admin applied it; the client role reads it through its grant.
  ClientRole role(migrated.admin());
  const SchemaState asClient =
      PostgresStore(migrated.options(fmt::format("user={}", role.name())))
          .schemaState();
  ASSERT_EQ(asClient.applied.size(), state.applied.size());
  EXPECT_EQ(asClient.applied.back().appliedAt, state.applied.back().appliedAt);
}

TEST(PostgresSchemaState, AppliedAtIsUtcWhateverTheSessionTimeZone) {
  FreshSchema schema;
  internal::applyPostgresMigrations(schema.options());
  const std::string utc =
      PostgresStore(schema.options("options='-c TimeZone=UTC'"))
          .schemaState()
          .applied.front()
          .appliedAt;
  const std::string elsewhere =
      PostgresStore(schema.options("options='-c TimeZone=Pacific/Chatham'"))
          .schemaState()
          .applied.front()
          .appliedAt;
  EXPECT_EQ(utc, elsewhere);
  // The server's own rendering of the same instant, in UTC.
  pqxx::nontransaction tx(schema.admin());
  const std::string expected =
      tx.exec(
            "SELECT to_char(applied_at AT TIME ZONE 'UTC', "
            "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM " +
            schema.admin().quote_name(schema.name()) +
            ".dlm_schema_version ORDER BY version LIMIT 1")[0][0]
          .as<std::string>();
  EXPECT_EQ(utc, expected);
  EXPECT_EQ(utc.size(), 24U) << utc;  // 2026-11-24T12:00:00.123Z
  EXPECT_EQ(utc.back(), 'Z');
}

TEST(PostgresSchemaState, IsBoundedByTheCallersDeadline) {
  FreshSchema schema;
  PostgresStore store(schema.options());
  DeadlineScope passed(std::chrono::steady_clock::now() - 1ms);
  try {
    store.schemaState();
    FAIL() << "answered after its deadline";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::CONNECTION_ERROR) << e.what();
    EXPECT_TRUE(e.transient());
  }
}

}  // namespace
}  // namespace dlm::test
