// Migration V3 (least privilege): what the application role (dlm_client), a second
// application login (the "attacker") and the admin role (dlm_admin) can and
// cannot do, a purge beside row locks of other transactions (the rest of the
// purge is in tests/store_contract), and the rolling-upgrade rule
// (schema state of older schemas, checksums, compatible_from).
//
// Every privilege check prints one line
//   PRIVILEGE <role> | <statement> | <allowed|denied SQLSTATE>
// for the issue's closing note.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "dlm/postgres_store.h"
#include "schema/migration.h"
#include "pg_client_role_support.h"
#include "postgres/pg_migrate.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"
#include "support/pg_test_support.h"
#include "support/test_keys.h"

namespace dlm::test {
namespace {

using namespace std::chrono_literals;

void logCheck(const std::string& role, const std::string& statement,
              const std::string& result) {
  std::printf("PRIVILEGE %s | %s | %s\n", role.c_str(), statement.c_str(),
              result.c_str());
  std::fflush(stdout);
}

std::string firstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.rfind("ERROR:  ", 0) == 0) line = line.substr(8);
  return line;
}

// Runs `sql` as `conn`'s role in its own transaction; "allowed" or
// "denied <SQLSTATE>".
std::string tryAs(pqxx::connection& conn, const std::string& sql) {
  try {
    pqxx::work tx(conn);
    tx.exec(sql);
    tx.commit();
    return "allowed";
  } catch (const pqxx::insufficient_privilege& e) {
    // libpqxx 6.4 leaves sqlstate() empty here; the class says 42501.
    return "denied 42501: " + firstLine(e.what());
  } catch (const pqxx::sql_error& e) {
    return "error " + e.sqlstate() + ": " + firstLine(e.what());
  }
}

// Runs a store call; "allowed" or "denied <message>".
template <typename Fn>
std::string tryStore(Fn&& fn) {
  try {
    fn();
    return "allowed";
  } catch (const DLMException& e) {
    return std::string("denied ") + e.what() + " [" +
           std::string(toString(e.code())) + "]";
  }
}

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// A migrated schema with an application login (dlm_client), a second
// application login (attacker, dlm_client too) and an admin login.
class LeastPrivilegeTest : public ::testing::Test {
 protected:
  LeastPrivilegeTest()
      : attacker_(stores_.admin()),
        app_(stores_.newStore()),
        admin_(stores_.newAdminStore()) {}

  std::string qualified(const std::string& name) { return stores_.table(name); }
  std::unique_ptr<pqxx::connection> attackerConnection() {
    return adminConnection(fmt::format("user={}", attacker_.name()));
  }
  PostgresStore attackerStore() {
    return PostgresStore(
        stores_.schema().options(fmt::format("user={}", attacker_.name())));
  }

  ClientStores stores_;
  ClientRole attacker_;
  std::unique_ptr<PostgresStore> app_;
  std::unique_ptr<PostgresStore> admin_;
};

TEST_F(LeastPrivilegeTest, AppRoleCanUseEveryLibraryOperation) {
  const std::string who = "app (dlm_client)";
  PostgresStore& s = *app_;
  const StoreKey key = pathKey("XDC#lp#", "jobs.nightly.import");
  const StoreKey root = pathKey("XDC#lp#", "jobs");
  auto check = [&](const std::string& op, bool ok) {
    logCheck(who, op, ok ? "allowed" : "denied");
    EXPECT_TRUE(ok) << op;
  };
  check("initialize()", tryStore([&] { s.initialize(false); }) == "allowed");
  check("schemaState()",
        s.schemaState().version() ==
            internal::latestVersion(internal::postgresMigrations()));
  const AcquireResult a = acquireAs(s, key, "owner-a", "tok-a");
  check("tryAcquire (dlm_acquire)", a.acquired && a.fencingToken == 1);
  check("tryAcquire refused by a held descendant",
        !acquireAs(s, root, "owner-b", "tok-b").acquired);
  check("extend (dlm_extend)",
        s.extend(key.key, "tok-a", 20s, dlm::LockMode::EXCLUSIVE).has_value());
  const auto record = s.describe(key.key);
  check("describe (dlm_describe)", record && record->held);
  check("listHeld (dlm_list_held)", s.listHeld("XDC#lp#").size() == 1);
  check("registerWait (dlm_register_wait)",
        s.registerWait({root, "owner-b", 10s}).deadlockCycle.empty());
  check("listWaiters (dlm_list_waiters)", s.listWaiters("XDC#lp#").size() == 1);
  check("unregisterWait (dlm_unregister_wait)",
        tryStore([&] { s.unregisterWait(root.key, "owner-b"); }) == "allowed");
  check("release (dlm_release)",
        s.release(key, "tok-a", dlm::LockMode::EXCLUSIVE));
  // commitLock: released inside the application's own transaction.
  ASSERT_TRUE(acquireAs(s, key, "owner-a", "tok-c").acquired);
  {
    pqxx::connection conn(stores_.conninfo());
    pqxx::work tx(conn);
    PostgresTransaction adapter(tx);
    check("commitLock (dlm_release_within)",
          tryStore([&] {
            s.commitLock(adapter, key, "tok-c", dlm::LockMode::EXCLUSIVE);
          }) == "allowed");
    tx.commit();
  }
  check("describe after commitLock shows it free", !s.describe(key.key)->held);
  check("now()", s.now().time_since_epoch().count() > 0);
}

TEST_F(LeastPrivilegeTest, AppRoleCannotTouchTablesRunDdlOrAdminFunctions) {
  auto conn = attackerConnection();
  const std::string who = "app (dlm_client)";
  struct Table {
    const char* name;
    const char* column;
  };
  const Table tables[] = {{"dlm_locks", "status"},
                          {"dlm_lock_requests", "expires_at"},
                          {"dlm_fencing_floor", "floor_token"},
                          {"dlm_schema_version", "description"},
                          {"dlm_config", "value"}};
  std::vector<std::string> statements;
  for (const Table& t : tables) {
    const std::string q = qualified(t.name);
    statements.push_back("SELECT * FROM " + q);
    statements.push_back("INSERT INTO " + q + " DEFAULT VALUES");
    statements.push_back(
        fmt::format("UPDATE {} SET {} = {}", q, t.column, t.column));
    statements.push_back("DELETE FROM " + q);
    statements.push_back("LOCK TABLE " + q + " IN ACCESS EXCLUSIVE MODE");
    statements.push_back("LOCK TABLE " + q + " IN ACCESS SHARE MODE");
    statements.push_back("TRUNCATE " + q);
    statements.push_back("ALTER TABLE " + q + " ADD COLUMN intruder int");
    statements.push_back("DROP TABLE " + q);
  }
  const std::string s = stores_.admin().quote_name(stores_.schema().name());
  statements.push_back("SELECT " + s + ".dlm_force_release('lp#x')");
  statements.push_back("SELECT * FROM " + s + ".dlm_purge(0, 100, false)");
  statements.push_back("SELECT * FROM " + s + ".dlm_purge(0, 100, true)");
  statements.push_back("SELECT " + s +
                       ".dlm_notify_waiters('k', '{}', NULL, NULL)");
  statements.push_back("CREATE TABLE " + s + ".intruder (i int)");
  statements.push_back("CREATE FUNCTION " + s +
                       ".starts_with(text, text) RETURNS boolean "
                       "LANGUAGE sql AS 'SELECT true'");
  statements.push_back("CREATE OR REPLACE FUNCTION " + s +
                       ".dlm_release(text, text, text[], text, text) "
                       "RETURNS boolean LANGUAGE sql AS 'SELECT true'");
  statements.push_back("ALTER FUNCTION " + s +
                       ".dlm_describe(text) SECURITY INVOKER");
  for (const std::string& sql : statements) {
    const std::string result = tryAs(*conn, sql);
    logCheck(who, sql, result);
    EXPECT_TRUE(startsWith(result, "denied 42501")) << sql << ": " << result;
  }
  // Through the library: the operator calls are refused too, as
  // PERMISSION_DENIED.
  PostgresStore store = attackerStore();
  for (const auto& [op, result] :
       std::vector<std::pair<std::string, std::string>>{
           {"store.forceRelease()",
            tryStore([&] { store.forceRelease("XDC#lp#x"); })},
           {"store.purgeIdle()",
            tryStore([&] { store.purgeIdle(0ms, 10, false); })}}) {
    logCheck(who, op, result.substr(0, 60));
    EXPECT_NE(result.find("42501"), std::string::npos) << op << ": " << result;
    EXPECT_NE(result.find("[PERMISSION_DENIED]"), std::string::npos)
        << op << ": " << result;
  }
}

TEST_F(LeastPrivilegeTest, NoListingShowsAnotherHoldersToken) {
  const std::string secret = "tok-secret-4f1c9a";
  const StoreKey key = pathKey("XDC#lp#", "orders.o1");
  ASSERT_TRUE(acquireAs(*app_, key, "owner-a", secret).acquired);
  // Another login of the same service (a member of the login that bound
  // client "lp" at its first use): it may see the holds, never a token.
  // (Another service sees nothing of them: tests/security.)
  execSql(stores_.admin(), fmt::format("GRANT {} TO {}",
                                       stores_.admin().quote_name(stores_.role()),
                                       stores_.admin().quote_name(attacker_.name())));
  ASSERT_TRUE(app_->registerWait({pathKey("XDC#lp#", "orders"), "owner-w", 10s})
                  .deadlockCycle.empty());
  auto conn = attackerConnection();
  const std::string s = conn->quote_name(stores_.schema().name());
  for (const std::string& sql :
       {"SELECT * FROM " + s + ".dlm_describe('" + key.key + "')",
        "SELECT * FROM " + s + ".dlm_list_held('')",
        "SELECT * FROM " + s + ".dlm_list_waiters('')",
        "SELECT * FROM " + s + ".dlm_schema_versions()"}) {
    pqxx::work tx(*conn);
    const pqxx::result r = tx.exec(sql);
    bool leaked = false;
    for (const auto& row : r) {
      for (const auto& f : row) {
        leaked = leaked || (!f.is_null() && std::string(f.c_str()).find(
                                                secret) != std::string::npos);
      }
    }
    for (pqxx::row::size_type c = 0; c < r.columns(); ++c) {
      EXPECT_NE(std::string(r.column_name(c)), "token") << sql;
    }
    logCheck("attacker (dlm_client)", sql,
             leaked ? "token visible" : "allowed, no token");
    EXPECT_FALSE(leaked) << sql;
    EXPECT_GT(r.size(), 0u) << sql;
  }
  // Knowing the key and owner is not enough to free it.
  PostgresStore store = attackerStore();
  const bool freed = store.release(key, "tok-guess", dlm::LockMode::EXCLUSIVE);
  logCheck("attacker (dlm_client)", "dlm_release(key, guessed token)",
           freed ? "released" : "refused (false)");
  EXPECT_FALSE(freed);
  EXPECT_TRUE(app_->describe(key.key)->held);
}

TEST_F(LeastPrivilegeTest, AdminRoleCanForceReleaseAndPurge) {
  const std::string who = "admin (dlm_admin)";
  const StoreKey key = pathKey("XDC#lp#", "forced");
  ASSERT_TRUE(acquireAs(*app_, key, "owner-a", "tok-a").acquired);
  const bool forced = admin_->forceRelease(key.key);
  logCheck(who, "store.forceRelease() (dlm_force_release)",
           forced ? "allowed" : "denied");
  EXPECT_TRUE(forced);
  const std::string purged =
      tryStore([&] { admin_->purgeIdle(0ms, 10, false); });
  logCheck(who, "store.purgeIdle() (dlm_purge)", purged);
  EXPECT_EQ(purged, "allowed");
  // The admin role can list as the client role can (membership).
  const std::string listed = tryStore([&] { admin_->listHeld(""); });
  logCheck(who, "store.listHeld() (dlm_list_held)", listed);
  EXPECT_EQ(listed, "allowed");
}

// ------------------------------------------------------------------ purge

class PurgeTest : public LeastPrivilegeTest {
 protected:
  // Acquires and releases `key` `times` times with short leases; returns the
  // last fencing token.
  std::int64_t cycle(const StoreKey& key, int times) {
    std::int64_t last = 0;
    for (int i = 0; i < times; ++i) {
      const std::string token = fmt::format("tok-{}-{}", key.key, ++serial_);
      const AcquireResult a = acquireAs(*app_, key, "owner", token, 20ms);
      EXPECT_TRUE(a.acquired);
      last = a.fencingToken;
      EXPECT_TRUE(app_->release(key, token, dlm::LockMode::EXCLUSIVE));
    }
    return last;
  }
  int rows() {
    pqxx::work tx(stores_.admin());
    return tx.exec("SELECT count(*) FROM " + qualified("dlm_locks"))[0][0]
        .as<int>();
  }
  int serial_ = 0;
};

TEST_F(PurgeTest, SkipsRowsAnotherTransactionHasLocked) {
  const StoreKey key = pathKey("XDC#pl#", "busy");
  cycle(key, 2);
  std::this_thread::sleep_for(60ms);
  auto other = adminConnection();
  pqxx::work tx(*other);
  tx.exec_params("SELECT 1 FROM " + qualified("dlm_locks") +
                     " WHERE resource = $1 FOR SHARE",
                 key.key);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(admin_->purgeIdle(10ms, 100, false).rows, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "waited";
  tx.abort();
  EXPECT_EQ(admin_->purgeIdle(10ms, 100, false).rows, 1);
}

// ------------------------------------------------- rolling upgrades

// Applies the first `count` migration files by hand (as psql would: no
// checksums recorded).
void applyByHand(FreshSchema& schema, std::size_t count) {
  const auto& migrations = internal::postgresMigrations();
  for (std::size_t i = 0; i < count; ++i) {
    pqxx::work tx(schema.admin());
    tx.exec("SET LOCAL search_path = " +
            schema.admin().quote_name(schema.name()));
    tx.exec(std::string(migrations[i].sql));
    tx.commit();
  }
}

TEST(PostgresCompatibility, SchemaStateOfAVersion2DatabaseAndWhatToApply) {
  FreshSchema schema;
  applyByHand(schema, 2);  // the previous release's schema
  PostgresStore store(schema.options());
  const SchemaState state = store.schemaState();
  EXPECT_TRUE(state.present);
  EXPECT_EQ(state.version(), 2);
  EXPECT_EQ(state.compatibleFrom, 0);
  for (const auto& m : state.applied) EXPECT_FALSE(m.checksum.has_value());
  // The previous release's role (V1 granted it SELECT) reads it too.
  ClientRole role(schema.admin());
  EXPECT_EQ(PostgresStore(schema.options("user=" + role.name()))
                .schemaState()
                .version(),
            2);
  try {
    store.initialize(false);
    FAIL() << "initialize accepted schema 2";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
    EXPECT_NE(std::string(e.what()).find(
                  "V3__least_privilege_purge_and_compatibility.sql"),
              std::string::npos)
        << e.what();
  }
  // initialize(true) brings it to the latest version and records the
  // checksums of what it applied (V3 on) only.
  store.initialize(true);
  const SchemaState after = store.schemaState();
  const auto& migrations = internal::postgresMigrations();
  EXPECT_EQ(after.version(), internal::latestVersion(migrations));
  // V5 (shared locks) serves libraries for schema 4 and up.
  EXPECT_EQ(after.compatibleFrom, 4);
  EXPECT_FALSE(after.applied[0].checksum.has_value());
  EXPECT_FALSE(after.applied[1].checksum.has_value());
  for (std::size_t i = 2; i < after.applied.size(); ++i) {
    ASSERT_TRUE(after.applied[i].checksum.has_value()) << i;
    EXPECT_EQ(*after.applied[i].checksum,
              internal::migrationChecksum(migrations[i]));
  }
}

TEST(PostgresCompatibility, TheApplierRecordsEveryChecksum) {
  FreshSchema schema;
  internal::applyPostgresMigrations(schema.options());
  const SchemaState state = PostgresStore(schema.options()).schemaState();
  const auto& migrations = internal::postgresMigrations();
  ASSERT_EQ(state.applied.size(), migrations.size());
  for (std::size_t i = 0; i < migrations.size(); ++i) {
    ASSERT_TRUE(state.applied[i].checksum.has_value()) << i;
    EXPECT_EQ(*state.applied[i].checksum,
              internal::migrationChecksum(migrations[i]))
        << migrations[i].file;
  }
  EXPECT_EQ(state.compatibleFrom, 4);
}

TEST(PostgresCompatibility, ANewerSchemaIsAcceptedWhileItServesThisLibrary) {
  ClientStores stores;
  const std::string table = stores.table("dlm_schema_version");
  const int latest = internal::latestVersion(internal::postgresMigrations());
  const std::string future = std::to_string(latest + 1);
  execSql(stores.admin(), "INSERT INTO " + table +
                              " (version, description, compatible_from) "
                              "VALUES (" +
                              future + ", 'future', " + future + ")");
  {
    auto store = std::make_unique<PostgresStore>(
        stores.schema().options(stores.conninfo()));
    try {
      store->initialize(false);
      FAIL() << "accepted a schema that no longer serves version " << latest;
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
      EXPECT_NE(std::string(e.what()).find("upgrade the library"),
                std::string::npos)
          << e.what();
    }
    // Nor does the migration opt-in try to "fix" it.
    EXPECT_THROW(store->initialize(true), DLMException);
  }
  execSql(stores.admin(), "UPDATE " + table + " SET compatible_from = " +
                              std::to_string(latest) +
                              " WHERE version = " + future);
  auto store = stores.newStore();  // initialize(false) inside
  EXPECT_EQ(store->schemaState().compatibleFrom, latest);
  EXPECT_TRUE(acquireAs(*store, pathKey("XDC#v4#", "x"), "o", "t").acquired);
  // With the opt-in too: nothing to apply to a newer schema.
  EXPECT_NO_THROW(store->initialize(true));
}

TEST(PostgresCompatibility, RoleNamesComeFromPgoptionsAndAreRecorded) {
  FreshSchema schema;
  const std::string client = uniqueName("dlm_pgtest_cl");
  const std::string admin = uniqueName("dlm_pgtest_ad");
  const char* old = std::getenv("PGOPTIONS");
  const std::string saved = old ? old : "";
  ::setenv(
      "PGOPTIONS",
      fmt::format("-c dlm.client_role={} -c dlm.admin_role={}", client, admin)
          .c_str(),
      1);
  try {
    PostgresStore(schema.options()).initialize(true);
  } catch (...) {
    old ? ::setenv("PGOPTIONS", saved.c_str(), 1) : ::unsetenv("PGOPTIONS");
    throw;
  }
  old ? ::setenv("PGOPTIONS", saved.c_str(), 1) : ::unsetenv("PGOPTIONS");
  pqxx::connection& conn = schema.admin();
  {
    pqxx::work tx(conn);
    const pqxx::result r =
        tx.exec("SELECT name, value FROM " + conn.quote_name(schema.name()) +
                ".dlm_config ORDER BY name");
    ASSERT_EQ(r.size(), 2u);
    EXPECT_EQ(r[0][1].as<std::string>(), admin);
    EXPECT_EQ(r[1][1].as<std::string>(), client);
    // The grants went to those roles, and dlm_client lost V1's.
    EXPECT_TRUE(tx.exec_params1("SELECT has_function_privilege($1, $2, "
                                "'EXECUTE')",
                                client,
                                schema.name() +
                                    ".dlm_acquire(text[], "
                                    "bigint[], text, text, text, "
                                    "text, bigint, text, bigint)")[0]
                    .as<bool>());
    EXPECT_TRUE(tx.exec_params1("SELECT has_function_privilege($1, $2, "
                                "'EXECUTE')",
                                admin,
                                schema.name() + ".dlm_purge(bigint, "
                                                "integer, boolean)")[0]
                    .as<bool>());
    EXPECT_FALSE(tx.exec_params1("SELECT has_table_privilege('dlm_client', "
                                 "$1, 'SELECT')",
                                 schema.name() + ".dlm_locks")[0]
                     .as<bool>());
  }
  // A login with the chosen client role locks.
  const std::string login = uniqueName("dlm_pgtest_login");
  execSql(conn, fmt::format("CREATE ROLE {} LOGIN IN ROLE {}",
                            conn.quote_name(login), conn.quote_name(client)));
  {
    PostgresStore store(schema.options("user=" + login));
    store.initialize(false);
    EXPECT_TRUE(acquireAs(store, pathKey("XDC#rn#", "x"), "o", "t").acquired);
    // Refused an operator's call, it is told the admin role this schema
    // has, read from the catalog (before: "GRANT dlm_admin TO <login>",
    // a role a schema with named roles does not use).
    const DLMException e = errorOf([&] { store.forceRelease("XDC#rn#x"); });
    EXPECT_EQ(e.code(), ErrorCode::PERMISSION_DENIED) << e.what();
    const std::string said = e.what();
    EXPECT_NE(said.find("roles with EXECUTE on function dlm_force_release in "
                        "this database: " +
                        admin + " "),
              std::string::npos)
        << said;
    EXPECT_EQ(said.find("dlm_admin"), std::string::npos) << said;
    // With the grant revoked, it says none has it.
    execSql(conn, fmt::format("REVOKE EXECUTE ON FUNCTION {}.dlm_force_release"
                              "(text) FROM {}",
                              conn.quote_name(schema.name()),
                              conn.quote_name(admin)));
    const std::string none =
        errorOf([&] { store.forceRelease("XDC#rn#x"); }).what();
    EXPECT_NE(none.find("no role of this database holds EXECUTE on function "
                        "dlm_force_release but its owner"),
              std::string::npos)
        << none;
    store.close();
  }
  execSql(conn, "DROP SCHEMA " + conn.quote_name(schema.name()) + " CASCADE");
  for (const std::string& r : {login, admin, client}) {
    execSql(conn, "DROP OWNED BY " + conn.quote_name(r));
    execSql(conn, "DROP ROLE " + conn.quote_name(r));
  }
}

}  // namespace
}  // namespace dlm::test
