// The schema versions this library knows: the migrations it ships for each
// store, as a tool reports them beside what a database recorded
// (LockStore::schemaState). Applying them is LockStore::initialize(true);
// the version this library needs is requiredSchemaVersion (dlm/version.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/export.h"

namespace dlm {

struct DLM_API KnownMigration {
  int version = 0;         // n of V<n>__<what>.sql
  std::string file;        // "V1__create_lock_tables.sql"
  // What the store records when applying it (AppliedMigration::checksum):
  // CRC-32 of the file's text, so that a file changed after it was applied
  // shows.
  std::uint32_t checksum = 0;
};

// The migrations this library ships for a store named "postgres" or
// "sqlite" (LockStore::name()), in version order; empty for any other name.
DLM_API std::vector<KnownMigration> knownMigrations(std::string_view storeName);

}  // namespace dlm
