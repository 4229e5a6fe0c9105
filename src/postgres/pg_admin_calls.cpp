#include "postgres/pg_admin_calls.h"

#include <fmt/format.h>

#include <string>

#include "common/utf8.h"
#include "dlm/error.h"
#include "dlm/lock_key.h"
#include "postgres/pg_statements.h"

namespace dlm::internal {
namespace {

using Params = std::vector<const char*>;

// A one-row, one-column answer, as every function here but the listing
// gives.
const PgResult& scalar(const PgResult& r, const char* function) {
  if (r.rows() != 1 || r.columns() != 1) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       fmt::format("{} returned {} rows of {} columns",
                                   function, r.rows(), r.columns()));
  }
  return r;
}

// Text the server would refuse (every text value is UTF-8).
void requireUtf8(std::string_view op, std::string_view what,
                 std::string_view text) {
  if (!isValidUtf8(text)) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("PostgreSQL store: {}: {} {} is not valid UTF-8", op, what,
                    printableBytes(text)));
  }
}

}  // namespace

void checkCancelArguments(std::string_view key,
                          std::optional<std::string_view> owner) {
  if (key.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgreSQL store: cancelRequests: the key is empty");
  }
  if (owner) requireUtf8("cancelRequests", "owner", *owner);
}

void checkBindArguments(std::string_view clientId, std::string_view role) {
  // The server checks too; the library's rule, before any I/O.
  validateClientId(clientId);
  if (role.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgreSQL store: bindClient: the role is empty");
  }
  requireUtf8("bindClient", "role", role);
}

std::vector<ClientBinding> pgListClients(PgConn& c, Deadline deadline) {
  const PgResult r =
      c.execPrepared(pgStatements().listClients, Params{}, deadline);
  std::vector<ClientBinding> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    ClientBinding b;
    b.clientId = r.text(row, 0);
    b.role = r.text(row, 1);
    b.firstUse = r.boolean(row, 2);
    b.boundBy = r.text(row, 3);
    b.boundAt = StoreTime(std::chrono::milliseconds(r.int64(row, 4)));
    if (!r.isNull(row, 5)) {
      const std::string separator = r.text(row, 5);
      // The library's separators are one printable ASCII byte; anything
      // else was not recorded by it.
      if (separator.size() != 1) {
        throw DLMException(
            ErrorCode::INTERNAL_ERROR,
            fmt::format("dlm_list_clients: client {} has the separator '{}', "
                        "not one byte",
                        b.clientId, separator));
      }
      b.separator = separator.front();
    }
    if (!r.isNull(row, 6)) b.hierarchy = r.boolean(row, 6);
    out.push_back(std::move(b));
  }
  return out;
}

void pgBindClient(PgConn& c, Deadline deadline, std::string_view clientId,
                  std::string_view role) {
  const std::string client(clientId), roleName(role);
  try {
    scalar(c.execPrepared(pgStatements().bindClient,
                          Params{client.c_str(), roleName.c_str()}, deadline),
           "dlm_bind_client");
  } catch (const PgError& e) {
    // invalid_parameter_value: the operator named a role that does not
    // exist (the store validated the clientId already). Elsewhere 22023
    // means a library bug (INTERNAL_ERROR); here it is the caller's input.
    if (e.sqlstate() != "22023") throw;
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       fmt::format("{} (SQLSTATE 22023)", e.what()));
  }
}

bool pgUnbindClient(PgConn& c, Deadline deadline, std::string_view clientId) {
  const std::string client(clientId);
  return scalar(c.execPrepared(pgStatements().unbindClient,
                               Params{client.c_str()}, deadline),
                "dlm_unbind_client")
      .boolean(0, 0);
}

namespace {

// One row of counts from dlm_purge_client or dlm_rebind_client; a 22023 is
// the caller's input (a clientId or role the server refuses; the store
// validated the clientId by the library's rule already).
ClientPurge clientPurgeOf(PgConn& c, Deadline deadline,
                          const PreparedStatement& statement,
                          const Params& params, const char* function) {
  try {
    const PgResult r = c.execPrepared(statement, params, deadline);
    if (r.rows() != 1 || r.columns() != 3) {
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         fmt::format("{} returned {} rows of {} columns",
                                     function, r.rows(), r.columns()));
    }
    ClientPurge out;
    out.holds = r.int64(0, 0);
    out.sharedHolds = r.int64(0, 1);
    out.requests = r.int64(0, 2);
    return out;
  } catch (const PgError& e) {
    if (e.sqlstate() != "22023") throw;
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       fmt::format("{} (SQLSTATE 22023)", e.what()));
  }
}

}  // namespace

ClientPurge pgPurgeClient(PgConn& c, Deadline deadline,
                          std::string_view clientId) {
  const std::string client(clientId);
  return clientPurgeOf(c, deadline, pgStatements().purgeClient,
                       Params{client.c_str()}, "dlm_purge_client");
}

ClientPurge pgRebindClient(PgConn& c, Deadline deadline,
                           std::string_view clientId, std::string_view role) {
  const std::string client(clientId);
  const std::string roleName(role);
  return clientPurgeOf(c, deadline, pgStatements().rebindClient,
                       Params{client.c_str(), roleName.c_str()},
                       "dlm_rebind_client");
}

int pgCancelRequests(PgConn& c, Deadline deadline, std::string_view key,
                     std::optional<std::string_view> owner) {
  const std::string k(key);
  const std::optional<std::string> o =
      owner ? std::optional<std::string>(std::string(*owner)) : std::nullopt;
  // A NULL owner: every waiter of the key.
  const PgResult r =
      c.execPrepared(pgStatements().cancelRequests,
                     Params{k.c_str(), o ? o->c_str() : nullptr}, deadline);
  return static_cast<int>(scalar(r, "dlm_cancel_requests").int64(0, 0));
}

}  // namespace dlm::internal
