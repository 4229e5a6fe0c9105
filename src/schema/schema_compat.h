// The rolling-upgrade rule, shared by the stores' initialize() and dlmctl:
// which schema versions a library may use, and checksums of migrations.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "dlm/lock_store_admin.h"
#include "schema/migration.h"

namespace dlm::internal {

// Throws SCHEMA_MISMATCH unless a library that ships `migrations` (built
// for the newest of them, L) may use a database in `state`: its version D
// equals L, or D > L and the database still serves L (compatibleFrom <= L).
// The message says what to do: which migration to apply (and `migrateHint`,
// e.g. "or run `dlmctl migrate --db ...`"), or that the library is too old
// for the database. `where` names the database ("PostgreSQL schema
// \"locks\"").
void requireCompatibleSchema(const SchemaState& state,
                             const std::vector<Migration>& migrations,
                             std::string_view storeDir, std::string_view where,
                             std::string_view migrateHint);

// The checksum dlm records for an applied migration: CRC-32 of its text
// (as Flyway does), so that a file changed after it was applied shows.
std::uint32_t migrationChecksum(const Migration& migration);

}  // namespace dlm::internal
