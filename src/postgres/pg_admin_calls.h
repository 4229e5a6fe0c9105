// The PostgreSQL store's client-binding and request-cancelling calls
// (LockStoreAdmin::listClients, bindClient, unbindClient, purgeClient,
// cancelRequests):
// each one statement calling a server function, on a connection the store
// leased for the call.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "dlm/deadline.h"
#include "dlm/lock_store_admin.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {

// Before any I/O: INVALID_ARGUMENT for an empty key or an owner that is not
// UTF-8 (the store's run() checks the key's UTF-8).
void checkCancelArguments(std::string_view key,
                          std::optional<std::string_view> owner);

// Before any I/O: INVALID_ARGUMENT for a clientId the library refuses
// (validateClientId) and an empty role or one that is not UTF-8.
void checkBindArguments(std::string_view clientId, std::string_view role);

// dlm_list_clients(), in clientId (byte) order.
std::vector<ClientBinding> pgListClients(PgConn& c, Deadline deadline);

// dlm_bind_client. A role that does not exist (or an argument the server
// refuses, SQLSTATE 22023) is INVALID_ARGUMENT.
void pgBindClient(PgConn& c, Deadline deadline, std::string_view clientId,
                  std::string_view role);

// dlm_unbind_client: true if there was a binding.
bool pgUnbindClient(PgConn& c, Deadline deadline, std::string_view clientId);

// dlm_purge_client (schema 17 on): what it ended. An argument the server
// refuses (SQLSTATE 22023) is INVALID_ARGUMENT.
ClientPurge pgPurgeClient(PgConn& c, Deadline deadline,
                          std::string_view clientId);

// dlm_rebind_client (schema 17 on): what it ended. As pgPurgeClient.
ClientPurge pgRebindClient(PgConn& c, Deadline deadline,
                           std::string_view clientId, std::string_view role);

// dlm_cancel_requests: how many request rows it deleted.
int pgCancelRequests(PgConn& c, Deadline deadline, std::string_view key,
                     std::optional<std::string_view> owner);

}  // namespace dlm::internal
