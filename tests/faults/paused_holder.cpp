// dlm_paused_holder: the holder process of the paused-holder test
// (paused_holder_test.cpp). It holds one lock with a short TTL and no
// renewal and writes to the application's table when told to, as an
// application does between acquiring and releasing; the test stops it
// (SIGSTOP) between the two.
//
//   dlm_paused_holder --url URL [--schema S] --table T --id ID --ttl-ms N
//       [--guarded]
//
// One command a line on stdin, one answer a line on stdout:
//   acquire         tryAcquireLock(ID, XDC, TTL N ms)  -> "held <fencing
//   token>" write <marker>  one application transaction on its own connection:
//                   BEGIN (SQLite: BEGIN IMMEDIATE); with --guarded
//                   guardWithin(lock, tx); INSERT INTO T VALUES (marker);
//                   COMMIT  -> "wrote", or "refused <error code>" when
//                   guardWithin threw, or "failed <what>" for any other
//                   error (the transaction is then rolled back)
//   release         releaseLock  -> "released 1" or "released 0"
// "ready" once the store is initialized. EOF on stdin ends it (exit 0). A
// failed acquire or release, or a bad command: "error <what>", exit 1.
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "dlm/dlm.h"
#include "dlm/sqlite_store.h"
#include "dlm/store_url.h"

#ifdef DLM_WITH_POSTGRES
#include <pqxx/pqxx>

#include "dlm/postgres_store.h"
#endif

namespace {

constexpr const char* kClient = "pause-proof";

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);  // the test is blocked reading it
}

// The application's own connection and its one kind of transaction.
class AppConnection {
 public:
  virtual ~AppConnection() = default;
  // BEGIN; guard(tx) when given; INSERT marker; COMMIT. Throws what the
  // guard or the database throws; the transaction is rolled back then.
  virtual void write(
      const std::string& marker,
      const std::function<void(dlm::AppTransaction&)>& guard) = 0;
};

class SqliteApp final : public AppConnection {
 public:
  SqliteApp(const std::string& path, std::string table)
      : table_(std::move(table)) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) !=
        SQLITE_OK) {
      throw std::runtime_error("cannot open " + path);
    }
    sqlite3_busy_timeout(db_, 5000);
  }
  ~SqliteApp() override { sqlite3_close_v2(db_); }

  void write(const std::string& marker,
             const std::function<void(dlm::AppTransaction&)>& guard) override {
    // BEGIN IMMEDIATE: the file's write lock from the start, as the store's
    // header asks of a guarded transaction.
    exec("BEGIN IMMEDIATE");
    try {
      if (guard) {
        dlm::SqliteTransaction adapter(db_);
        guard(adapter);
      }
      sqlite3_stmt* stmt = nullptr;
      const std::string sql = "INSERT INTO " + table_ + " VALUES (?1)";
      if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) !=
          SQLITE_OK) {
        throw std::runtime_error(sqlite3_errmsg(db_));
      }
      sqlite3_bind_text(stmt, 1, marker.data(), static_cast<int>(marker.size()),
                        SQLITE_TRANSIENT);
      const int rc = sqlite3_step(stmt);
      sqlite3_finalize(stmt);
      if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db_));
      exec("COMMIT");
    } catch (...) {
      // guardWithin rolled back already when it refused; anything else
      // leaves the transaction open.
      if (sqlite3_get_autocommit(db_) == 0) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      throw;
    }
  }

 private:
  void exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error != nullptr ? error : "unknown error";
      sqlite3_free(error);
      throw std::runtime_error(std::string(sql) + ": " + message);
    }
  }

  sqlite3* db_ = nullptr;
  std::string table_;
};

#ifdef DLM_WITH_POSTGRES
class PostgresApp final : public AppConnection {
 public:
  PostgresApp(const std::string& conninfo, std::string table)
      : conn_(conninfo), table_(std::move(table)) {}

  void write(const std::string& marker,
             const std::function<void(dlm::AppTransaction&)>& guard) override {
    pqxx::work tx(conn_);  // aborted by its destructor if not committed
    if (guard) {
      dlm::PostgresTransaction adapter(tx);
      guard(adapter);
    }
    tx.exec_params("INSERT INTO " + table_ + " VALUES ($1)", marker);
    tx.commit();
  }

 private:
  pqxx::connection conn_;
  std::string table_;
};
#endif

std::unique_ptr<AppConnection> openApp(const std::string& url,
                                       const std::string& table) {
  const dlm::ParsedStoreUrl parsed = dlm::parseStoreUrl(url);
  if (parsed.kind == dlm::StoreKind::SQLITE) {
    return std::make_unique<SqliteApp>(parsed.location, table);
  }
#ifdef DLM_WITH_POSTGRES
  return std::make_unique<PostgresApp>(parsed.location, table);
#else
  throw std::runtime_error("built without the PostgreSQL store");
#endif
}

int serve(const std::string& url, const std::string& schema,
          const std::string& table, const std::string& id, long ttlMs,
          bool guarded) {
  auto manager = dlm::DistributedLockManager::builder()
                     .clientId(kClient)
                     .store(dlm::openStore(url, schema))
                     .build();
  manager->initialize();
  const std::unique_ptr<AppConnection> app = openApp(url, table);
  dlm::Lock lock = manager->getLockInstance(id, dlm::LockLevel::XDC);
  say("ready");
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "acquire") {
      manager->tryAcquireLock(lock, std::chrono::milliseconds(ttlMs));
      say("held " + std::to_string(lock.fencingToken()));
    } else if (line.rfind("write ", 0) == 0) {
      const std::string marker = line.substr(6);
      std::function<void(dlm::AppTransaction&)> guard;
      if (guarded) {
        guard = [&](dlm::AppTransaction& tx) {
          manager->guardWithin(lock, tx);
        };
      }
      try {
        app->write(marker, guard);
        say("wrote");
      } catch (const dlm::DLMException& e) {
        say("refused " + std::string(dlm::toString(e.code())));
        std::fprintf(stderr, "dlm_paused_holder: %s\n", e.what());
      } catch (const std::exception& e) {
        say(std::string("failed ") + e.what());
      }
    } else if (line == "release") {
      say(manager->releaseLock(lock) ? "released 1" : "released 0");
    } else {
      say("error unknown command: " + line);
      return 1;
    }
  }
  manager->destroy();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"the holder process of the paused-holder test"};
  std::string url, schema, table, id;
  long ttlMs = 1000;
  bool guarded = false;
  cli.add_option("--url", url)->required();
  cli.add_option("--schema", schema);
  cli.add_option("--table", table)->required();
  cli.add_option("--id", id)->required();
  cli.add_option("--ttl-ms", ttlMs)->required()->check(CLI::Range(1L, 600000L));
  cli.add_flag("--guarded", guarded);
  CLI11_PARSE(cli, argc, argv);
  try {
    return serve(url, schema, table, id, ttlMs, guarded);
  } catch (const std::exception& e) {
    say(std::string("error ") + e.what());
    return 1;
  }
}
