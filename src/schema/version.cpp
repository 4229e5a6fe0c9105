#include "dlm/version.h"

#include "schema/migration.h"

#ifndef DLM_VERSION
#error "DLM_VERSION must be defined by the build (CMakeLists.txt)"
#endif

namespace dlm {

std::string_view version() noexcept { return DLM_VERSION; }

int requiredSchemaVersion(std::string_view storeName) noexcept {
  // The migration lists are built from constants at first use; neither
  // allocation failing is a reason to give up noexcept here.
  if (storeName == "postgres") {
    return internal::latestVersion(internal::postgresMigrations());
  }
  if (storeName == "sqlite") {
    return internal::latestVersion(internal::sqliteMigrations());
  }
  return 0;
}

}  // namespace dlm
