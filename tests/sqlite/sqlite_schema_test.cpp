// Schema and migrations of the SQLite store: schema/sqlite.sql equals the sum
// of migrations/sqlite/, initialize() checks the version and names what to
// apply, and concurrent initializers apply each migration once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlm/error.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"
#include "sqlite_test_util.h"

namespace dlm::sqlite_test {
namespace {

// SQL text without comments and with runs of whitespace collapsed, so that
// a comment or layout change in one file is not reported as a schema
// difference (string literals are kept as they are).
std::string normalizeSql(const std::string& sql) {
  std::string out;
  bool space = false;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {  // copy a quoted literal or identifier
      const std::size_t end = sql.find(c, i + 1);
      const std::size_t stop = end == std::string::npos ? sql.size() : end + 1;
      if (space && !out.empty()) out += ' ';
      space = false;
      out.append(sql, i, stop - i);
      i = stop - 1;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const std::size_t end = sql.find('\n', i);
      i = end == std::string::npos ? sql.size() : end;
      space = true;
    } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
      space = true;
    } else {
      // No space after '(' or before ')' / ',': layout, not content.
      if (space && !out.empty() && out.back() != '(' && c != ')' && c != ',') {
        out += ' ';
      }
      space = false;
      out += c;
    }
  }
  return out;
}

// Every schema object of the file with its normalized SQL, in a fixed order.
std::vector<std::string> schemaOf(RawDb& db) {
  std::vector<std::string> out;
  for (const auto& row :
       db.rows("SELECT type || ' ' || name || ' on ' || tbl_name, "
               "coalesce(sql, '') FROM sqlite_master ORDER BY type, name")) {
    const auto bar = row.find('|');
    out.push_back(row.substr(0, bar) + ": " +
                  normalizeSql(row.substr(bar + 1)));
  }
  return out;
}

class SqliteSchemaTest : public ::testing::Test {
 protected:
  TempDir dir_;
};

TEST_F(SqliteSchemaTest, SchemaFileAndAllMigrationsGiveTheSameSchema) {
  const std::string fromSchema = dir_.file("schema.sqlite");
  const std::string fromMigrations = dir_.file("migrations.sqlite");
  RawDb a(fromSchema);
  a.exec(std::string(internal::sqliteSchemaSql()));
  RawDb b(fromMigrations);
  for (const auto& m : internal::sqliteMigrations()) {
    b.exec("BEGIN;" + std::string(m.sql) + ";COMMIT;");
  }

  const auto schemaA = schemaOf(a);
  EXPECT_GE(schemaA.size(), 3U);  // two tables and the requests index at least
  EXPECT_EQ(schemaA, schemaOf(b));
  const std::string versions =
      "SELECT version || ' ' || description || ' ' || "
      "coalesce(compatible_from, 'NULL') FROM dlm_schema_version "
      "ORDER BY version";
  EXPECT_EQ(a.rows(versions), b.rows(versions));
  const std::string floor = "SELECT * FROM dlm_fencing_floor";
  EXPECT_EQ(a.rows(floor), b.rows(floor));
  EXPECT_EQ(a.rows(floor), std::vector<std::string>{"1|0"});
  // The caps' one row, at the defaults, either way (a DBA's UPDATE of a
  // file made from the schema file must find it).
  const std::string limits = "SELECT * FROM dlm_limits";
  EXPECT_EQ(a.rows(limits), b.rows(limits));
  EXPECT_EQ(a.rows(limits),
            std::vector<std::string>{"1|31536000000|8192|64|100|1000"});
  EXPECT_EQ(
      a.scalar("SELECT max(version) FROM dlm_schema_version"),
      std::to_string(internal::latestVersion(internal::sqliteMigrations())));
}

TEST_F(SqliteSchemaTest, UpgradingAVersion1FileKeepsItsLocks) {
  const std::string path = dir_.file("v1.sqlite");
  {
    RawDb v1(path);
    v1.exec("BEGIN;" + std::string(internal::sqliteMigrations().front().sql) +
            ";COMMIT;");
    v1.exec(
        "INSERT INTO dlm_locks (resource, resource_crc, status, owner_id, "
        "token, fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) "
        "VALUES ('DC#f#c#old', 0, 'HELD', 'A', 't', 7, 0, 1, 9000000000000)");
  }
  auto store = openStore(path);  // applies the later migrations
  const auto row = store->describe("DC#f#c#old");
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->held);
  EXPECT_EQ(row->fencingToken, 7);
  // The request table of the new version works.
  const StoreKey key = pathKey("DC#f#c#", "old");
  EXPECT_EQ(store->registerWait(WaitRequest{key, "A", std::chrono::seconds(5)})
                .deadlockCycle,
            std::vector<std::string>{"DC#f#c#old"});
  EXPECT_TRUE(
      store->registerWait(WaitRequest{key, "B", std::chrono::seconds(5)})
          .deadlockCycle.empty());
}

TEST_F(SqliteSchemaTest, TheStoreAcceptsAFileMadeFromTheSchemaFile) {
  const std::string path = dir_.file("locks.sqlite");
  RawDb(path).exec(std::string(internal::sqliteSchemaSql()));
  SqliteStore store(SqliteStoreOptions{path});
  EXPECT_NO_THROW(store.initialize(/*applyMigrations=*/false));
  EXPECT_TRUE(acquire(store, pathKey("", "x")).acquired);
}

// The embedded store needs no migration step: a file without dlm's tables
// (here the application's own database) gets them from initialize().
TEST_F(SqliteSchemaTest, AFileWithoutDlmTablesGetsThemFromInitialize) {
  const std::string path = dir_.file("app.sqlite");
  RawDb(path).exec("CREATE TABLE orders (id INTEGER PRIMARY KEY, state TEXT);"
                   "INSERT INTO orders VALUES (1, 'new')");
  SqliteStore store(SqliteStoreOptions{path});
  EXPECT_NO_THROW(store.initialize(/*applyMigrations=*/false));
  EXPECT_TRUE(acquire(store, pathKey("", "x")).acquired);
  EXPECT_EQ(RawDb(path).scalar("SELECT max(version) FROM dlm_schema_version"),
            std::to_string(internal::latestVersion(internal::sqliteMigrations())));
  EXPECT_EQ(RawDb(path).scalar("SELECT state FROM orders WHERE id = 1"), "new");
}

// A first start that fails leaves nothing behind: here SQLite creates the
// file, then cannot create its WAL beside it.
TEST_F(SqliteSchemaTest, AFailedInitializeOfANewFileLeavesNoFile) {
  const std::string path = dir_.file("new.sqlite");
  std::filesystem::create_directory(path + "-wal");
  // SQLite retries the WAL's creation until busyTimeout.
  SqliteStore store(SqliteStoreOptions{path, std::chrono::milliseconds(200)});
  EXPECT_THROW(store.initialize(/*applyMigrations=*/false), DLMException);
  EXPECT_FALSE(std::filesystem::exists(path));
  // A file that was there before is never removed, even when it fails.
  const std::string existing = dir_.file("existing.sqlite");
  RawDb(existing).exec("CREATE TABLE t (x)");
  std::filesystem::create_directory(existing + "-wal");
  SqliteStore other(
      SqliteStoreOptions{existing, std::chrono::milliseconds(200)});
  EXPECT_THROW(other.initialize(/*applyMigrations=*/false), DLMException);
  EXPECT_TRUE(std::filesystem::exists(existing));
}

TEST_F(SqliteSchemaTest, AnOlderVersionNamesTheFirstMissingMigration) {
  const std::string path = dir_.file("old.sqlite");
  // A version table with nothing applied yet: version 0.
  RawDb(path).exec(
      "CREATE TABLE dlm_schema_version (version INTEGER PRIMARY KEY, "
      "description TEXT NOT NULL, applied_at TEXT)");
  SqliteStore store(SqliteStoreOptions{path});
  try {
    store.initialize(/*applyMigrations=*/false);
    FAIL() << "initialize accepted an old schema";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
    EXPECT_NE(std::string(e.what()).find(
                  std::string(internal::sqliteMigrations().front().file)),
              std::string::npos)
        << e.what();
  }
}

TEST_F(SqliteSchemaTest, ANewerVersionIsSchemaMismatch) {
  const std::string path = dir_.file("new.sqlite");
  { auto store = openStore(path); }
  RawDb(path).exec(
      "INSERT INTO dlm_schema_version (version, description) "
      "VALUES (1000, 'from the future')");
  SqliteStore store(SqliteStoreOptions{path});
  for (const bool apply : {false, true}) {
    try {
      store.initialize(apply);
      FAIL() << "initialize accepted a newer schema";
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
      EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(SqliteSchemaTest,
       AFailingMigrationIsTableCreationErrorAndLeavesNoTrace) {
  const std::string path = dir_.file("clash.sqlite");
  // A table in the way of V1's CREATE TABLE dlm_locks.
  RawDb(path).exec("CREATE TABLE dlm_locks (x INTEGER)");
  SqliteStore store(SqliteStoreOptions{path});
  try {
    store.initialize(/*applyMigrations=*/true);
    FAIL() << "the migration succeeded over an existing table";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::TABLE_CREATION_ERROR);
    EXPECT_NE(std::string(e.what()).find("V1__"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("SQLite code"), std::string::npos)
        << e.what();
  }
  // The migration's transaction was rolled back as a whole.
  RawDb raw(path);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM sqlite_master "
                       "WHERE name = 'dlm_schema_version'"),
            "0");
}

// Asked to migrate or not: a new file's schema is made once, whole (without
// applyMigrations a second initializer must never meet a part of it).
TEST_F(SqliteSchemaTest, ConcurrentInitializersApplyEachMigrationOnce) {
  for (const bool asked : {true, false}) {
  SCOPED_TRACE(asked ? "applyMigrations" : "without applyMigrations");
  const std::string path = dir_.file(asked ? "race.sqlite" : "race2.sqlite");
  constexpr int kThreads = 4;
  std::vector<std::unique_ptr<SqliteStore>> stores;
  for (int i = 0; i < kThreads; ++i) {
    stores.push_back(std::make_unique<SqliteStore>(SqliteStoreOptions{path}));
  }
  std::atomic<int> ready{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      try {
        stores[static_cast<std::size_t>(i)]->initialize(asked);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(i)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& error : errors) EXPECT_EQ(error, "");
  RawDb raw(path);
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM dlm_schema_version"),
            std::to_string(internal::sqliteMigrations().size()));
  // And every store works on the result.
  for (auto& store : stores) {
    EXPECT_NO_THROW(store->initialize(false));
  }
  }
}

// ------------------------------------------- compatibility and checksums

// A file with migrations V1..V`upTo` applied by hand, as a DBA with sqlite3
// would: no checksums recorded.
void applyByHand(const std::string& path, int upTo) {
  RawDb db(path);
  for (const auto& m : internal::sqliteMigrations()) {
    if (m.version > upTo) break;
    db.exec("BEGIN;" + std::string(m.sql) + ";COMMIT;");
  }
}

const internal::Migration& migrationV(int version) {
  for (const auto& m : internal::sqliteMigrations()) {
    if (m.version == version) return m;
  }
  throw std::runtime_error("no migration V" + std::to_string(version));
}

TEST_F(SqliteSchemaTest, TheApplierRecordsTheChecksumOfEveryMigrationItRan) {
  const std::string path = dir_.file("checksums.sqlite");
  openStore(path).reset();
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  ASSERT_EQ(state.applied.size(), internal::sqliteMigrations().size());
  for (std::size_t i = 0; i < state.applied.size(); ++i) {
    const auto& m = internal::sqliteMigrations()[i];
    EXPECT_EQ(state.applied[i].version, m.version);
    ASSERT_TRUE(state.applied[i].checksum.has_value()) << m.file;
    EXPECT_EQ(*state.applied[i].checksum, internal::migrationChecksum(m))
        << m.file;
  }
  EXPECT_EQ(state.compatibleFrom, 4);
  // Stored as the unsigned 32-bit value, not a negative number.
  EXPECT_EQ(RawDb(path).scalar(
                "SELECT count(*) FROM dlm_schema_version WHERE checksum < 0"),
            "0");
}

TEST_F(SqliteSchemaTest, AVersion2FileReadsWithoutCompatibilityAndNamesV3) {
  const std::string path = dir_.file("v2.sqlite");
  applyByHand(path, 2);
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_TRUE(state.present);
  EXPECT_EQ(state.version(), 2);
  EXPECT_EQ(state.compatibleFrom, 0);
  ASSERT_EQ(state.applied.size(), 2U);
  EXPECT_FALSE(state.applied[0].checksum.has_value());
  EXPECT_FALSE(state.applied[1].checksum.has_value());

  try {
    store.initialize(/*applyMigrations=*/false);
    FAIL() << "initialize accepted a version-2 file";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
    const std::string message = e.what();
    EXPECT_NE(message.find("at version 2"), std::string::npos) << message;
    EXPECT_NE(message.find("apply migrations/sqlite/" +
                           std::string(migrationV(3).file)),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("dlmctl migrate --db sqlite:" + path),
              std::string::npos)
        << message;
  }

  // The applier records the checksum of what it ran only: V3 and later, not
  // the migrations applied by hand before.
  store.initialize(/*applyMigrations=*/true);
  const SchemaState upgraded = store.schemaState();
  ASSERT_EQ(upgraded.applied.size(), internal::sqliteMigrations().size());
  EXPECT_FALSE(upgraded.applied[0].checksum.has_value());
  EXPECT_FALSE(upgraded.applied[1].checksum.has_value());
  for (std::size_t i = 2; i < upgraded.applied.size(); ++i) {
    const int version = upgraded.applied[i].version;
    ASSERT_TRUE(upgraded.applied[i].checksum.has_value()) << version;
    EXPECT_EQ(*upgraded.applied[i].checksum,
              internal::migrationChecksum(migrationV(version)));
  }
  EXPECT_EQ(upgraded.compatibleFrom, 4);
}

TEST_F(SqliteSchemaTest, AFileMadeFromTheSchemaFileHasNoChecksums) {
  const std::string path = dir_.file("by-hand.sqlite");
  RawDb(path).exec(std::string(internal::sqliteSchemaSql()));
  const SchemaState state = SqliteStore(SqliteStoreOptions{path}).schemaState();
  ASSERT_FALSE(state.applied.empty());
  for (const auto& m : state.applied) EXPECT_FALSE(m.checksum.has_value());
  EXPECT_EQ(state.compatibleFrom, 4);
}

// The schema version this library is built for.
int latest() { return internal::latestVersion(internal::sqliteMigrations()); }

// A migration of a later library (the version after this library's),
// recorded by hand.
void addFutureVersion(const std::string& path, int compatibleFrom) {
  RawDb(path).exec(
      "INSERT INTO dlm_schema_version (version, description, "
      "compatible_from) VALUES (" +
      std::to_string(latest() + 1) + ", 'from a later release', " +
      std::to_string(compatibleFrom) + ")");
}

TEST_F(SqliteSchemaTest, ANewerSchemaThatNoLongerServesThisLibraryIsRefused) {
  const std::string path = dir_.file("v4-incompatible.sqlite");
  openStore(path).reset();
  addFutureVersion(path, latest() + 1);
  SqliteStore store(SqliteStoreOptions{path});
  for (const bool apply : {false, true}) {
    try {
      store.initialize(apply);
      FAIL() << "initialize accepted a schema that no longer serves it";
    } catch (const DLMException& e) {
      EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
      EXPECT_NE(std::string(e.what()).find("upgrade the library"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(store.schemaState().compatibleFrom, latest() + 1);
}

TEST_F(SqliteSchemaTest, ANewerSchemaThatStillServesThisLibraryIsAccepted) {
  const std::string path = dir_.file("v4-compatible.sqlite");
  openStore(path).reset();
  addFutureVersion(path, latest());
  SqliteStore store(SqliteStoreOptions{path});
  EXPECT_NO_THROW(store.initialize(/*applyMigrations=*/false));
  EXPECT_NO_THROW(store.initialize(/*applyMigrations=*/true));
  EXPECT_TRUE(acquire(store, pathKey("", "x")).acquired);
  const SchemaState state = store.schemaState();
  EXPECT_EQ(state.version(), latest() + 1);
  EXPECT_EQ(state.compatibleFrom, latest());
}

// The migrations a library built for schema version `version` shipped.
std::vector<internal::Migration> migrationsUpTo(int version) {
  std::vector<internal::Migration> out;
  for (const auto& m : internal::sqliteMigrations()) {
    if (m.version <= version) out.push_back(m);
  }
  return out;
}

TEST_F(SqliteSchemaTest,
       AVersion3FileUpgradedToTheLatestKeepsLocksAndCounters) {
  const std::string path = dir_.file("v3.sqlite");
  applyByHand(path, 3);
  {
    // What the release built for version 3 left behind: a live lock, a
    // released key with its counter, a raised fencing floor and a waiter.
    RawDb v3(path);
    v3.exec(
        "INSERT INTO dlm_locks (resource, resource_crc, status, owner_id, "
        "token, fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) VALUES "
        "('DC#f#c#held', 0, 'HELD', 'A', 't', 7, 0, 1, 9000000000000), "
        "('DC#f#c#free', 0, 'FREE', 'A', 'u', 12, 0, 1, 1);"
        "UPDATE dlm_fencing_floor SET fencing_token = 40;"
        "INSERT INTO dlm_lock_requests (resource, owner_id, requested_at_ms, "
        "expires_at_ms) VALUES ('DC#f#c#held', 'B', 1, 9000000000000);");
  }
  auto store = openStore(path);  // applies V4 and later
  EXPECT_EQ(store->schemaState().version(), latest());
  const auto held = store->holdersOf("DC#f#c#held");
  ASSERT_EQ(held.size(), 1U);
  EXPECT_TRUE(held[0].held);
  EXPECT_EQ(held[0].mode, LockMode::EXCLUSIVE);
  EXPECT_EQ(held[0].fencingToken, 7);
  // The old request row reads as EXCLUSIVE.
  const auto waiters = store->listWaiters("DC#f#c#held");
  ASSERT_EQ(waiters.size(), 1U);
  EXPECT_EQ(waiters[0].mode, LockMode::EXCLUSIVE);
  // The lock is still held: a SHARED attempt is refused by it.
  const Holder holder{"h", 1};
  const StoreKey heldKey = pathKey("DC#f#c#", "held");
  const AcquireResult refused = store->tryAcquire(
      AcquireRequest{heldKey, "C", "c-token", std::chrono::seconds(5), holder,
                     LockMode::SHARED});
  EXPECT_FALSE(refused.acquired);
  EXPECT_EQ(refused.blockedBy, "DC#f#c#held");
  // The counters go on above what the old release issued and the floor.
  const StoreKey freeKey = pathKey("DC#f#c#", "free");
  const AcquireResult shared = store->tryAcquire(
      AcquireRequest{freeKey, "C", "s-token", std::chrono::seconds(5), holder,
                     LockMode::SHARED});
  ASSERT_TRUE(shared.acquired);
  EXPECT_EQ(shared.fencingToken, 41);
  const AcquireResult fresh = acquire(*store, pathKey("DC#f#c#", "new"));
  ASSERT_TRUE(fresh.acquired);
  EXPECT_EQ(fresh.fencingToken, 41);
}

TEST_F(SqliteSchemaTest, ALibraryBuiltForVersion3RefusesAVersion4File) {
  const std::string path = dir_.file("v4.sqlite");
  applyByHand(path, 4);
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_EQ(state.version(), 4);
  EXPECT_EQ(state.compatibleFrom, 4);
  // The check the release built for schema version 3 runs: it would decide
  // conflicts without the SHARED holds, so the file no longer serves it.
  try {
    internal::requireCompatibleSchema(state, migrationsUpTo(3), "sqlite",
                                      "sqlite store 'v4.sqlite'", "");
    FAIL() << "a library built for schema version 3 accepted version 4";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::SCHEMA_MISMATCH);
    EXPECT_NE(std::string(e.what()).find("upgrade the library"),
              std::string::npos)
        << e.what();
  }
  // The release built for version 4 accepts it, of course.
  EXPECT_NO_THROW(internal::requireCompatibleSchema(state, migrationsUpTo(4),
                                                    "sqlite", "here", ""));
}

TEST_F(SqliteSchemaTest, ALibraryBuiltForVersion4AcceptsAVersion5File) {
  const std::string path = dir_.file("v5.sqlite");
  applyByHand(path, 5);
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_EQ(state.version(), 5);
  // V5 only adds the caps' table and an index, which a version-4 library
  // never names: it keeps serving that release.
  EXPECT_EQ(state.compatibleFrom, 4);
  EXPECT_NO_THROW(internal::requireCompatibleSchema(
      state, migrationsUpTo(4), "sqlite", "sqlite store 'v5.sqlite'", ""));
  EXPECT_NO_THROW(internal::requireCompatibleSchema(state, migrationsUpTo(5),
                                                    "sqlite", "here", ""));
}

TEST_F(SqliteSchemaTest,
       AVersion4FileUpgradedToVersion5KeepsItsWaitersAndHolds) {
  const std::string path = dir_.file("v4-upgrade.sqlite");
  applyByHand(path, 4);
  RawDb(path).exec(
      "INSERT INTO dlm_locks (resource, resource_crc, fencing_token) "
      "VALUES ('DC#f#c#s', 0, 3);"
      "INSERT INTO dlm_shared_holds (resource, token, owner_id, "
      "fencing_token, acquired_at_ms, ttl_ms, expires_at_ms) VALUES "
      "('DC#f#c#s', 't', 'A', 3, 0, 1, 9000000000000);"
      "INSERT INTO dlm_lock_requests (resource, owner_id, requested_at_ms, "
      "expires_at_ms, mode) VALUES ('DC#f#c#s', 'B', 1, 9000000000000, "
      "'EXCLUSIVE')");
  auto store = openStore(path);  // applies V5
  EXPECT_EQ(store->schemaState().version(), latest());
  ASSERT_EQ(store->holdersOf("DC#f#c#s").size(), 1U);
  ASSERT_EQ(store->listWaiters("DC#f#c#s").size(), 1U);
  EXPECT_EQ(RawDb(path).scalar("SELECT count(*) FROM dlm_limits"), "1");
}

// ------------------------------------------------------------ schemaState

// The directory's entries (file names), to tell that nothing was created.
std::vector<std::string> filesIn(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(SqliteSchemaTest,
       SchemaStateOfAMissingFileIsNotPresentAndCreatesNothing) {
  const std::string path = dir_.file("absent.sqlite");
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_FALSE(state.present);
  EXPECT_TRUE(state.applied.empty());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(filesIn(dir_.path()).empty()) << "no -wal, -shm or journal";
  // Nor a missing directory.
  const std::string deeper = dir_.file("no-such-dir/locks.sqlite");
  EXPECT_FALSE(SqliteStore(SqliteStoreOptions{deeper}).schemaState().present);
  EXPECT_TRUE(filesIn(dir_.path()).empty());
}

TEST_F(SqliteSchemaTest, SchemaStateOfAnEmptyFileIsNotPresentAndLeavesItEmpty) {
  const std::string path = dir_.file("empty.sqlite");
  std::ofstream(path).close();
  ASSERT_TRUE(std::filesystem::exists(path));
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_FALSE(state.present);
  EXPECT_TRUE(state.applied.empty());
  EXPECT_EQ(std::filesystem::file_size(path), 0U);
  EXPECT_EQ(filesIn(dir_.path()), std::vector<std::string>{"empty.sqlite"});
}

TEST_F(SqliteSchemaTest, SchemaStateReadsAFileWithoutChangingItsJournalMode) {
  // Made from the schema file by a plain connection: rollback journal, not
  // WAL, which the store's own connection would switch it to.
  const std::string path = dir_.file("plain.sqlite");
  RawDb(path).exec(std::string(internal::sqliteSchemaSql()));
  SqliteStore store(SqliteStoreOptions{path});
  const SchemaState state = store.schemaState();
  EXPECT_TRUE(state.present);
  EXPECT_EQ(state.version(),
            internal::latestVersion(internal::sqliteMigrations()));
  ASSERT_EQ(state.applied.size(), internal::sqliteMigrations().size());
  EXPECT_EQ(state.applied.front().version, 1);
  EXPECT_EQ(state.applied.front().description, "create lock tables");
  EXPECT_EQ(RawDb(path).scalar("PRAGMA journal_mode"), "delete");
}

TEST_F(SqliteSchemaTest, SchemaStateOfAnIdleWalFileLeavesNoFilesBehind) {
  const std::string path = dir_.file("idle.sqlite");
  openStore(path)->close();  // migrated, WAL, no connection left open
  ASSERT_EQ(filesIn(dir_.path()), std::vector<std::string>{"idle.sqlite"});
  SqliteStore store(SqliteStoreOptions{path});
  EXPECT_EQ(store.schemaState().version(),
            internal::latestVersion(internal::sqliteMigrations()));
  EXPECT_EQ(filesIn(dir_.path()), std::vector<std::string>{"idle.sqlite"})
      << "the look left -wal / -shm files behind";
}

TEST_F(SqliteSchemaTest, SchemaStateAnswersWhileAnotherConnectionWrites) {
  const std::string path = dir_.file("busy.sqlite");
  openStore(path).reset();  // migrated, WAL
  RawDb writer(path);
  writer.exec("BEGIN IMMEDIATE; DELETE FROM dlm_locks;");
  SqliteStore store(SqliteStoreOptions{path, std::chrono::milliseconds(100)});
  const SchemaState state = store.schemaState();
  EXPECT_TRUE(state.present);
  EXPECT_EQ(state.version(),
            internal::latestVersion(internal::sqliteMigrations()));
  writer.exec("ROLLBACK");
}

TEST_F(SqliteSchemaTest, SchemaStateOfAnInMemoryStoreIsItsOwnDatabase) {
  SqliteStore store(SqliteStoreOptions{":memory:"});
  EXPECT_FALSE(store.schemaState().present);
  store.initialize(/*applyMigrations=*/true);
  EXPECT_EQ(store.schemaState().version(),
            internal::latestVersion(internal::sqliteMigrations()));
}

TEST_F(SqliteSchemaTest, SchemaStateAfterCloseIsAnInternalError) {
  SqliteStore store(SqliteStoreOptions{dir_.file("closed.sqlite")});
  store.close();
  try {
    store.schemaState();
    FAIL() << "a closed store answered";
  } catch (const DLMException& e) {
    EXPECT_EQ(e.code(), ErrorCode::INTERNAL_ERROR);
  }
}

}  // namespace
}  // namespace dlm::sqlite_test
