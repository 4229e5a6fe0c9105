#include "postgres/pg_replication.h"

#include <fmt/format.h>

#include "dlm/error.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {

ReplicationSettings readReplicationSettings(PgConn& conn, Deadline deadline) {
  const PgResult r = conn.exec(
      "SELECT current_setting('synchronous_commit'), "
      "current_setting('synchronous_standby_names')",
      deadline);
  if (r.rows() != 1) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "PostgreSQL store: reading the replication settings "
                       "returned no row");
  }
  return {r.text(0, 0), r.text(0, 1)};
}

std::string whyAcquiresAreNotReplicated(const ReplicationSettings& s) {
  if (s.synchronousStandbyNames.empty()) {
    return "the server has no synchronous standby "
           "(synchronous_standby_names is empty)";
  }
  if (s.synchronousCommit == "local") {
    return "synchronous_commit is 'local' for this role and database";
  }
  return "";
}

std::string enforceSynchronousReplication(SynchronousReplication policy,
                                          const ReplicationSettings& s) {
  if (policy == SynchronousReplication::NOT_CHECKED) return "";
  const std::string why = whyAcquiresAreNotReplicated(s);
  if (why.empty()) return "";
  const std::string message = fmt::format(
      "PostgreSQL store: acquires do not wait for a standby: {}; a failover "
      "can lose a committed acquire (a second holder, a repeated fencing "
      "token)",
      why);
  if (policy == SynchronousReplication::REQUIRED) {
    throw DLMException(ErrorCode::SCHEMA_MISMATCH,
                       message + " (synchronousReplication REQUIRED)");
  }
  return message;
}

}  // namespace dlm::internal
