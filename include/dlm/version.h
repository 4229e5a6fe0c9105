// Which dlm this is: the library's release and the schema it needs.
#pragma once

#include <string_view>

#include "dlm/export.h"

namespace dlm {

// The library's release, "MAJOR.MINOR.PATCH" (the CMake project version).
DLM_API std::string_view version() noexcept;

// The schema version this library needs in a store's database: the newest
// migration it ships for "postgres" or "sqlite" (LockStore::name()); 0 for
// any other name.
DLM_API int requiredSchemaVersion(std::string_view storeName) noexcept;

}  // namespace dlm
