// The public list of the migrations this library ships
// (dlm/schema_version.h), from the embedded files.
#include "dlm/schema_version.h"

#include "schema/migration.h"
#include "schema/schema_compat.h"

namespace dlm {

std::vector<KnownMigration> knownMigrations(std::string_view storeName) {
  std::vector<KnownMigration> out;
  if (storeName != "postgres" && storeName != "sqlite") return out;
  const std::vector<internal::Migration>& embedded =
      storeName == "postgres" ? internal::postgresMigrations()
                              : internal::sqliteMigrations();
  for (const internal::Migration& m : embedded) {
    out.push_back({m.version, std::string(m.file),
                   internal::migrationChecksum(m)});
  }
  return out;
}

}  // namespace dlm
