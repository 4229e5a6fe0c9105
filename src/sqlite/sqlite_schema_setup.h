// SqliteStore::initialize and schemaState: reading the version table, making
// dlm's tables in a file that has none, and applying the missing migrations
// (each in one BEGIN IMMEDIATE transaction).
#pragma once

#include "dlm/lock_store_admin.h"
#include "sqlite/sqlite_connection.h"

namespace dlm::internal::sqlite {

// Every row of the version table, or present == false when the file has
// none. Several statements outside a transaction: a migration committing in
// between only makes the answer newer.
SchemaState readSchemaState(Connection& c);

// initialize's work on the store's connection: a file without dlm's tables
// gets them all in one transaction (asked or not); an older dlm schema is
// migrated only with `applyMigrations`. Then the schema must serve this
// library (the rolling-upgrade rule): SCHEMA_MISMATCH naming what to apply
// otherwise; TABLE_CREATION_ERROR when creating or migrating failed.
void initializeSchemaIn(Connection& c, bool applyMigrations);

}  // namespace dlm::internal::sqlite
