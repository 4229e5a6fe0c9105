// Which roles hold the privilege a refused call lacked, read from the
// catalog of the database the call ran in: a hint that names the roles the
// DBA actually made (docs/dba.md names them per service), never a default
// the schema may not have.
#pragma once

#include <string>
#include <string_view>

#include "dlm/deadline.h"

namespace dlm::internal {

class PgConn;

// For a 42501 message "permission denied for function NAME" or "... for
// schema NAME": "roles with EXECUTE on NAME in this database: a, b (GRANT
// one of them TO <login>)", or that none (but its owner) has it. "" for
// any other message or when the lookup fails (the caller's error stands).
std::string privilegeHint(PgConn& conn, std::string_view message,
                          Deadline deadline) noexcept;

// The object a permission-denied message names: {"function", "dlm_purge"};
// empty parts when it names none.
struct DeniedObject {
  std::string kind;
  std::string name;
};
DeniedObject deniedObject(std::string_view message);

}  // namespace dlm::internal
