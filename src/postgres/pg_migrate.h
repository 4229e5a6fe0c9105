// Applying dlm's PostgreSQL migrations from code (the builder's opt-in,
// PostgresStore::initialize(true), and `dlmctl migrate`).
#pragma once

#include "dlm/postgres_store.h"

namespace dlm::internal {

// Brings the database named by `options` (in options.schema, or the first
// schema of the role's search_path) to the newest embedded migration: each
// missing migrations/postgres/V<n>__*.sql runs in its own transaction, after
// pg_advisory_xact_lock on a fixed key and a re-check of the version inside
// that transaction, so processes migrating at once apply each step once.
// Uses its own connection (not a pool), closed on return.
//
// Once dlm_schema_version has its checksum column (schema 3), it records
// the CRC-32 (migrationChecksum) of every file this call applied.
//
// Returns how many migrations it applied (0 when already up to date).
// Throws DLMException: CONNECTION_ERROR (transient) when the server cannot be
// reached, SCHEMA_MISMATCH when the database is newer than this library,
// TABLE_CREATION_ERROR (with the SQLSTATE) when a migration failed; that
// migration is rolled back, earlier ones stay.
int applyPostgresMigrations(const PostgresStoreOptions& options);

// The dlm schema version recorded in the database (max(version) of
// dlm_schema_version), 0 when the table is empty, -1 when it does not exist.
// Throws like applyPostgresMigrations.
int postgresSchemaVersion(const PostgresStoreOptions& options);

}  // namespace dlm::internal
