// Helpers for the PostgreSQL-only tests: an admin connection from the PG*
// variables, and fresh schemas / roles / databases removed at the end.
#pragma once

#include <pqxx/pqxx>
#include <string>

#include "dlm/postgres_store.h"
#include "support/test_stores.h"

namespace dlm::test {

// A superuser-ish connection named by PG* variables. Throws (failing the
// test) when the server cannot be reached: these tests never skip.
std::unique_ptr<pqxx::connection> adminConnection(
    const std::string& conninfo = "");

// Runs one statement in autocommit on `conn`.
pqxx::result execSql(pqxx::connection& conn, const std::string& sql);

// A new, empty schema, dropped (CASCADE) when destroyed.
class FreshSchema {
 public:
  FreshSchema();
  ~FreshSchema();
  FreshSchema(const FreshSchema&) = delete;
  FreshSchema& operator=(const FreshSchema&) = delete;

  const std::string& name() const { return name_; }
  pqxx::connection& admin() { return *admin_; }
  // Options for a store on this schema; `connection` as in
  // PostgresStoreOptions (empty = PG* variables).
  PostgresStoreOptions options(const std::string& connection = "") const;

 private:
  std::unique_ptr<pqxx::connection> admin_;
  std::string name_;
};

// A fresh schema at the newest dlm schema version, for the tests that need
// one ready (not the tests of the migrations themselves: they take a
// FreshSchema and apply the migrations). Made the way a DBA makes one:
// schema/postgres.sql in one transaction (tests/postgres checks that it
// gives the catalog, version rows and checksums the migrations give). A
// quarter of the time of applying the migrations one at a time, in the tens
// of fixtures per test program. A migration newer than schema/postgres.sql
// (not regenerated yet: schema_snapshot_postgres fails) is then applied
// the usual way, so the other tests still run on the newest schema.
class MigratedSchema : public FreshSchema {
 public:
  MigratedSchema();
};

// A LOGIN role that has nothing but membership in dlm_client; dropped when
// destroyed.
class ClientRole {
 public:
  explicit ClientRole(pqxx::connection& admin);
  ~ClientRole();
  ClientRole(const ClientRole&) = delete;
  ClientRole& operator=(const ClientRole&) = delete;

  const std::string& name() const { return name_; }

 private:
  pqxx::connection& admin_;
  std::string name_;
};

// A LOGIN role that has nothing but membership in dlm_admin (which has
// dlm_client's rights too, migration V3); dropped when destroyed.
class AdminRole {
 public:
  explicit AdminRole(pqxx::connection& admin);
  ~AdminRole();
  AdminRole(const AdminRole&) = delete;
  AdminRole& operator=(const AdminRole&) = delete;

  const std::string& name() const { return name_; }

 private:
  pqxx::connection& admin_;
  std::string name_;
};

}  // namespace dlm::test
