#include "postgres/privilege_hint.h"

#include <fmt/format.h>

#include "postgres/pg_conn.h"

namespace dlm::internal {

DeniedObject deniedObject(std::string_view message) {
  for (const char* kind : {"function", "schema"}) {
    const std::string marker = fmt::format("permission denied for {} ", kind);
    const std::size_t at = message.find(marker);
    if (at == std::string_view::npos) continue;
    std::string_view rest = message.substr(at + marker.size());
    const std::size_t end = rest.find_first_of(" \n\t;,");
    rest = rest.substr(0, end);
    if (rest.size() >= 2 && rest.front() == '"' && rest.back() == '"') {
      rest = rest.substr(1, rest.size() - 2);
    }
    if (!rest.empty()) return {kind, std::string(rest)};
  }
  return {};
}

std::string privilegeHint(PgConn& conn, std::string_view message,
                          Deadline deadline) noexcept {
  try {
    const DeniedObject denied = deniedObject(message);
    if (denied.name.empty() || !conn.usable()) return "";
    const bool function = denied.kind == "function";
    // Grantees other than the object's owner (whose right is implicit and
    // not one to hand out); a function of the schema the session resolves
    // names in.
    const char* sql =
        function
            ? "SELECT coalesce(string_agg(DISTINCT r.rolname::text, ', ' "
              "ORDER BY r.rolname::text), '') "
              "FROM pg_catalog.pg_proc p "
              "CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a "
              "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
              "WHERE p.proname = $1 AND a.privilege_type = 'EXECUTE' "
              "AND a.grantee <> p.proowner "
              "AND p.pronamespace = (SELECT n.oid FROM "
              "pg_catalog.pg_namespace n WHERE n.nspname = current_schema())"
            : "SELECT coalesce(string_agg(DISTINCT r.rolname::text, ', ' "
              "ORDER BY r.rolname::text), '') "
              "FROM pg_catalog.pg_namespace n "
              "CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a "
              "JOIN pg_catalog.pg_roles r ON r.oid = a.grantee "
              "WHERE n.nspname = $1 AND a.privilege_type = 'USAGE' "
              "AND a.grantee <> n.nspowner";
    const PgResult r = conn.execParams(sql, {denied.name.c_str()}, deadline);
    const std::string roles = r.rows() > 0 ? r.text(0, 0) : "";
    const char* privilege = function ? "EXECUTE" : "USAGE";
    if (roles.empty()) {
      return fmt::format(
          "no role of this database holds {} on {} {} but its owner: the "
          "dlm schema's roles are missing or were revoked (docs/dba.md)",
          privilege, denied.kind, denied.name);
    }
    return fmt::format(
        "roles with {} on {} {} in this database: {} (an admin grants one "
        "of them: GRANT <role> TO <login>; docs/dba.md)",
        privilege, denied.kind, denied.name, roles);
  } catch (...) {
    return "";
  }
}

}  // namespace dlm::internal
