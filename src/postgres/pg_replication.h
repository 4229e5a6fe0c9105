// Whether a PostgreSQL server makes an acquire's commit wait for a standby
// (PostgresStoreOptions::synchronousReplication, checked at initialize()).
#pragma once

#include <string>

#include "dlm/deadline.h"
#include "dlm/synchronous_replication.h"

namespace dlm::internal {

class PgConn;

struct ReplicationSettings {
  std::string synchronousCommit;        // the session's setting
  std::string synchronousStandbyNames;  // the server's
};

// Reads both settings on `conn` (any role may).
ReplicationSettings readReplicationSettings(PgConn& conn, Deadline deadline);

// "" when an acquire's commit waits for a standby under `s`: the acquire
// functions raise synchronous_commit off to on, so waiting needs
// synchronous_standby_names set and synchronous_commit other than local.
// Otherwise why not, for messages.
std::string whyAcquiresAreNotReplicated(const ReplicationSettings& s);

// Applies `policy` to `s` when acquires are not replicated synchronously:
// returns the warning to give (WARN) or throws DLMException
// SCHEMA_MISMATCH (REQUIRED). "" when there is nothing to say.
std::string enforceSynchronousReplication(SynchronousReplication policy,
                                          const ReplicationSettings& s);

}  // namespace dlm::internal
