// dlmctl migrate: brings the database's schema up to this build's version.
#include <fmt/format.h>

#include "cli/cli_args.h"
#include "cli/commands.h"
#include "dlm/store_url.h"

namespace dlm::cli {

int runMigrate(const GlobalOptions& global, Args& args) {
  args.requireEmpty();
  auto store = openCliStore(global);
  // initialize(true) applies what is missing, then verifies the version: on
  // success the schema is exactly at this build's version.
  store->initialize(/*applyMigrations=*/true);
  fmt::print(
      "{} database {}{}: schema at version {}\n", store->name(),
      describeStoreUrl(global.db),
      global.schema.empty() ? "" : fmt::format(" (schema {})", global.schema),
      schemaVersionFor(*store));
  store->close();
  return 0;
}

}  // namespace dlm::cli
