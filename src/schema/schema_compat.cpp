#include "schema/schema_compat.h"

#include <fmt/format.h>

#include "common/crc32.h"
#include "dlm/error.h"

namespace dlm::internal {

void requireCompatibleSchema(const SchemaState& state,
                             const std::vector<Migration>& migrations,
                             std::string_view storeDir, std::string_view where,
                             std::string_view migrateHint) {
  const int needed = latestVersion(migrations);
  const int found = state.version();
  if (found == needed) return;
  if (found < needed) {
    std::string_view next;
    for (const Migration& m : migrations) {
      if (m.version > found) {
        next = m.file;
        break;
      }
    }
    throw DLMException(
        ErrorCode::SCHEMA_MISMATCH,
        found == 0
            ? fmt::format("{} has no dlm schema; this library needs schema "
                          "version {}: apply migrations/{}/{} and the later "
                          "ones {}",
                          where, needed, storeDir, next, migrateHint)
            : fmt::format("the dlm schema in {} is at version {}, this "
                          "library needs version {}: apply migrations/{}/{} "
                          "and the later ones {}",
                          where, found, needed, storeDir, next, migrateHint));
  }
  // A newer schema: usable while it still serves this library's version.
  const int servesFrom =
      state.compatibleFrom > 0 ? state.compatibleFrom : found;
  if (servesFrom <= needed) return;
  throw DLMException(
      ErrorCode::SCHEMA_MISMATCH,
      fmt::format("the dlm schema in {} is at version {} and serves "
                  "libraries built for schema version {} or later; this "
                  "library is built for version {}: upgrade the library "
                  "(dlmctl --version shows what a build needs)",
                  where, found, servesFrom, needed));
}

std::uint32_t migrationChecksum(const Migration& migration) {
  return crc32(migration.sql);
}

}  // namespace dlm::internal
