// The statements the PostgreSQL store prepares on its connections.
#pragma once

#include "postgres/pg_conn.h"

namespace dlm::internal {

// Every statement the store runs, each prepared lazily, on first use, on
// each connection (PgConn::execPrepared).
struct PgStatements {
  PreparedStatement acquire;
  PreparedStatement release;
  PreparedStatement releaseShared;
  PreparedStatement registerWait;
  PreparedStatement unregisterWait;
  PreparedStatement waitCycle;
  PreparedStatement releaseHints;
  PreparedStatement functionSchema;
  PreparedStatement extend;
  PreparedStatement extendShared;
  PreparedStatement forceRelease;
  PreparedStatement describe;
  PreparedStatement holdersOf;
  PreparedStatement listHeld;
  PreparedStatement listWaiters;
  PreparedStatement schemaVersions;
  PreparedStatement schemaVersionsV1;
  PreparedStatement purge;
  PreparedStatement cancelRequests;
  PreparedStatement listClients;
  PreparedStatement bindClient;
  PreparedStatement unbindClient;
  PreparedStatement purgeClient;
  PreparedStatement rebindClient;
  PreparedStatement now;
  // Batches (schema 19).
  PreparedStatement acquireEach;
  PreparedStatement releaseEach;
  PreparedStatement extendEach;
  PreparedStatement acquireAll;
};

// The one set (built on first use).
const PgStatements& pgStatements();

}  // namespace dlm::internal
