#include "support/pg_test_support.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "postgres/pg_migrate.h"
#include "schema/migration.h"
#include "schema/schema_compat.h"

namespace dlm::test {

std::unique_ptr<pqxx::connection> adminConnection(const std::string& conninfo) {
  try {
    return std::make_unique<pqxx::connection>(conninfo);
  } catch (const pqxx::broken_connection& e) {
    throw std::runtime_error(fmt::format(
        "the PostgreSQL tests need a server named by the PG* variables "
        "(scripts/pg-cluster.sh start DIR; . DIR/env): {}",
        e.what()));
  }
}

pqxx::result execSql(pqxx::connection& conn, const std::string& sql) {
  pqxx::nontransaction tx(conn);
  return tx.exec(sql);
}

FreshSchema::FreshSchema()
    : admin_(adminConnection()), name_(uniqueName("dlm_test")) {
  execSql(*admin_, "CREATE SCHEMA " + admin_->quote_name(name_));
}

FreshSchema::~FreshSchema() {
  try {
    execSql(*admin_,
            "DROP SCHEMA IF EXISTS " + admin_->quote_name(name_) + " CASCADE");
  } catch (const std::exception& e) {
    // A leftover schema must not turn a passing run into a crash.
    std::fprintf(stderr, "dropping schema %s: %s\n", name_.c_str(), e.what());
  }
}

PostgresStoreOptions FreshSchema::options(const std::string& connection) const {
  PostgresStoreOptions o;
  o.connection = connection;
  o.schema = name_;
  return o;
}

MigratedSchema::MigratedSchema() {
  const auto& migrations = internal::postgresMigrations();
  pqxx::connection& conn = admin();
  int version = 0;
  {
    pqxx::work tx(conn);
    // The migration path's lock ("dlm_mig", src/postgres/pg_migrate.cpp):
    // other test programs make schemas at the same time, and the roles and
    // their grants are the cluster's, shared by all.
    tx.exec("SELECT pg_advisory_xact_lock(" +
            std::to_string(0x646c6d5f6d6967LL) + ")");
    tx.exec("SET LOCAL search_path = " + conn.quote_name(name()));
    // The file carries each migration's checksum (schema status: "ok"),
    // and is applied with the role names a DBA gives it (the tests' roles).
    tx.exec("SET LOCAL dlm.client_role = 'dlm_client'");
    tx.exec("SET LOCAL dlm.admin_role = 'dlm_admin'");
    tx.exec(std::string(internal::postgresSchemaSql()));
    const pqxx::row newest =
        tx.exec1("SELECT coalesce(max(version), 0) FROM dlm_schema_version");
    version = newest[0].as<int>();
    tx.commit();
  }
  if (version < internal::latestVersion(migrations)) {
    internal::applyPostgresMigrations(options());
  }
}

ClientRole::ClientRole(pqxx::connection& admin)
    : admin_(admin), name_(uniqueName("dlm_pgtest_role")) {
  execSql(admin_, "CREATE ROLE " + admin_.quote_name(name_) + " LOGIN");
  execSql(admin_, "GRANT dlm_client TO " + admin_.quote_name(name_));
}

ClientRole::~ClientRole() {
  try {
    // Its sessions end with the stores that used it; DROP OWNED revokes
    // what a test granted it, which would otherwise block DROP ROLE.
    execSql(admin_, "DROP OWNED BY " + admin_.quote_name(name_));
    execSql(admin_, "DROP ROLE " + admin_.quote_name(name_));
  } catch (const std::exception& e) {
    // Leave it behind rather than crash the run.
    std::fprintf(stderr, "dropping role %s: %s\n", name_.c_str(), e.what());
  }
}

AdminRole::AdminRole(pqxx::connection& admin)
    : admin_(admin), name_(uniqueName("dlm_pgtest_admin")) {
  execSql(admin_, "CREATE ROLE " + admin_.quote_name(name_) + " LOGIN");
  execSql(admin_, "GRANT dlm_admin TO " + admin_.quote_name(name_));
}

AdminRole::~AdminRole() {
  try {
    execSql(admin_, "DROP OWNED BY " + admin_.quote_name(name_));
    execSql(admin_, "DROP ROLE " + admin_.quote_name(name_));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dropping role %s: %s\n", name_.c_str(), e.what());
  }
}

}  // namespace dlm::test
