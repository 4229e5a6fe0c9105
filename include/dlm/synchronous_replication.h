// What a PostgreSQL store checks about replication at initialize()
// (PostgresStoreOptions::synchronousReplication).
#pragma once

namespace dlm {

// An acquire is durable across a failover only if its commit waited for a
// standby: the server has synchronous_standby_names set and the store's
// sessions run with synchronous_commit on, remote_write or remote_apply.
// Otherwise a committed acquire can be lost when the standby is promoted,
// and the key then has a second holder and repeats a fencing token.
enum class SynchronousReplication {
  NOT_CHECKED,  // no check (a single server, or the DBA vouches for it)
  WARN,         // initialize() tells the store's warning listeners when
                // acquires do not wait for a standby (each manager using
                // the store reports a STORE_WARNING event), and goes on
  REQUIRED,     // initialize() throws SCHEMA_MISMATCH when they do not
};

}  // namespace dlm
