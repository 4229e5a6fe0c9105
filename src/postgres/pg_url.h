// Parsing a PostgreSQL database URL (a postgresql:// URI or a libpq keyword
// string) for parseStoreUrl.
#pragma once

#include <string>

#include "dlm/store_url.h"

namespace dlm {
namespace internal {

// Checks `url` with libpq's parser and takes dlm's own dlm_* parameters
// out of it. Throws INVALID_ARGUMENT (password redacted; the message gives only the
// reason) when libpq cannot
// parse it or a dlm_* parameter is unknown or has a bad value.
ParsedStoreUrl parsePostgresUrl(const std::string& url);

}  // namespace internal
}  // namespace dlm
