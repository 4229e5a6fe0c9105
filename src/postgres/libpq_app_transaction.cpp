#include "postgres/libpq_app_transaction.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <memory>
#include <string>

#include "dlm/error.h"
#include "postgres/pg_conn.h"
#include "postgres/pg_errors.h"

namespace dlm::internal {
namespace {

// Why the connection cannot take the statement now; empty when it can.
// Checked before anything is sent: PQexecParams would otherwise run the
// statement in autocommit (no transaction: commitLock would release at
// once), or first read and discard results the application has not read
// yet (a command in progress).
std::string_view notIdleInTransaction(PGconn* conn) {
#ifdef LIBPQ_HAS_PIPELINING
  // The blocking calls are refused in pipeline mode; the statement would
  // also land among the application's queued ones.
  if (PQpipelineStatus(conn) != PQ_PIPELINE_OFF) {
    return "the connection is in pipeline mode (leave it with "
           "PQexitPipelineMode first)";
  }
#endif
  switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS:
      return {};
    case PQTRANS_IDLE:
      return "no transaction is open on the connection (send BEGIN first)";
    case PQTRANS_INERROR:
      return "the transaction on the connection has already failed (its "
             "COMMIT would roll back): roll it back";
    case PQTRANS_ACTIVE:
      return "a command is in progress on the connection (read all its "
             "results first)";
    case PQTRANS_UNKNOWN:
      break;
  }
  return "the connection's transaction state is unknown";
}

// `schema` quoted as an identifier, as the connection's encoding wants.
std::string quotedSchema(PGconn* conn, const std::string& schema) {
  struct Free {
    void operator()(char* p) const noexcept { PQfreemem(p); }
  };
  const std::unique_ptr<char, Free> quoted(
      PQescapeIdentifier(conn, schema.data(), schema.size()));
  if (!quoted) throw PgError("", PQerrorMessage(conn), false);
  return std::string(quoted.get());
}

}  // namespace

void runInLibpqTransaction(const LibpqTransaction& tx, std::string_view context,
                           const std::string& schema, std::string_view call,
                           const std::vector<const char*>& params) {
  PGconn* conn = tx.connection();
  if (conn == nullptr) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("{}: the dlm::LibpqTransaction has no connection (null)",
                    context));
  }
  if (PQstatus(conn) == CONNECTION_BAD) {
    // Translated as a connection lost during a store call is:
    // CONNECTION_ERROR.
    try {
      throw PgError("08006",
                    std::string("the application's connection is broken: ") +
                        PQerrorMessage(conn),
                    true);
    } catch (...) {
      throw translatePgError(context);
    }
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    // Still connecting (PQconnectStart): no transaction can be open yet.
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       fmt::format("{}: the application's connection is not "
                                   "established yet",
                                   context));
  }
  if (const std::string_view why = notIdleInTransaction(conn); !why.empty()) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("{}: the application's connection is not idle in an "
                    "open transaction: {}",
                    context, why));
  }
  try {
    // Not prepared: that would leave a statement behind on the
    // application's connection. Schema-qualified because that connection's
    // search_path need not name dlm's schema (the function pins its own).
    // Parameters untyped, as libpqxx sends them: the function's signature
    // types them.
    const std::string sql =
        "SELECT " + quotedSchema(conn, schema) + "." + std::string(call);
    const PgResult result(PQexecParams(conn, sql.c_str(),
                                       static_cast<int>(params.size()), nullptr,
                                       params.data(), nullptr, nullptr, 0));
    if (result.get() == nullptr) {
      // libpq made no result: out of memory, or the connection broke while
      // sending.
      const bool lost = PQstatus(conn) == CONNECTION_BAD;
      throw PgError(lost ? "08006" : "", PQerrorMessage(conn), lost);
    }
    if (PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
      // The server's error (DLM01: the lock is lost) has failed the
      // application's transaction, so its COMMIT rolls back.
      throw PgConn::errorOf(conn, result.get());
    }
  } catch (...) {
    throw translatePgError(context);
  }
}

}  // namespace dlm::internal
