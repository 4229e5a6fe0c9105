#include "postgres/pg_app_transaction.h"

#include <fmt/format.h>

#include <pqxx/pqxx>
#include <vector>

#include "dlm/postgres_store.h"
#include "postgres/libpq_app_transaction.h"
#include "postgres/pg_array.h"
#include "postgres/pg_errors.h"

namespace dlm::internal {
namespace {

std::string contextOf(std::string_view call, const StoreKey& key) {
  return fmt::format("PostgreSQL store: {} {}", call, key.key);
}

// The application's open libpqxx transaction behind a PostgresTransaction;
// INVALID_ARGUMENT for an adapter of another store or a transaction that
// commits each statement at once.
pqxx::transaction_base& openTransaction(AppTransaction& appTx,
                                        std::string_view call,
                                        const StoreKey& key) {
  auto* adapter = dynamic_cast<PostgresTransaction*>(&appTx);
  if (adapter == nullptr) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("PostgreSQL store: {} {}: the application transaction "
                    "must be a dlm::PostgresTransaction or a "
                    "dlm::LibpqTransaction",
                    call, key.key));
  }
  pqxx::transaction_base& tx = adapter->transaction();
  // A nontransaction commits each statement at once: there is no
  // transaction for the call to be part of.
  if (dynamic_cast<pqxx::nontransaction*>(&tx) != nullptr) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("PostgreSQL store: {} {}: a pqxx::nontransaction is not "
                    "an open transaction",
                    call, key.key));
  }
  return tx;
}

// Runs `statement` in `tx` and turns a failure into the store's error.
// Limitation: libpqxx 6.4 sends exec_params on a transaction object that was
// already committed or aborted, in autocommit, and offers no way to ask
// whether it is open without a round trip. Such a call then runs on its own
// (commitLock: releases at once, as rollbackLock would; guardWithin: guards
// nothing) instead of failing with INVALID_ARGUMENT.
template <typename... Args>
void runInTransaction(pqxx::transaction_base& tx, std::string_view call,
                      const StoreKey& key, const std::string& statement,
                      Args&&... args) {
  try {
    tx.exec_params(statement, std::forward<Args>(args)...);
  } catch (const pqxx::usage_error& e) {
    // libpqxx refused the statement (a transaction it knows is closed).
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("PostgreSQL store: {} {}: the application transaction is "
                    "not open: {}",
                    call, key.key, e.what()));
  } catch (...) {
    // DLM01 (lock lost) becomes LOCK_NOT_HELD. Any error has aborted the
    // application's transaction in the server, so its COMMIT would roll
    // back, but silently: libpqxx 6.4 does not count a failed exec_params
    // against the transaction object and its commit() would return
    // normally. A failed exec() does count (libpqxx aborts the
    // transaction), so after this the application's commit() throws.
    DLMException error = translatePgError(contextOf(call, key));
    try {
      tx.exec("SELECT 1", "dlm: the transaction failed in " + std::string(call));
    } catch (...) {
      // Expected: "current transaction is aborted" (25P02).
    }
    throw error;
  }
}

}  // namespace

void releaseInAppTransaction(AppTransaction& appTx, const std::string& schema,
                             const StoreKey& key, std::string_view token,
                             LockMode mode) {
  const std::vector<std::string_view> items(key.ancestors.begin(),
                                            key.ancestors.end());
  const std::string ancestors = textArrayLiteral(items);
  const std::string tokenText(token);
  const std::string call =
      std::string(mode == LockMode::SHARED ? "dlm_release_shared_within"
                                           : "dlm_release_within") +
      "($1, $2, $3::text[], $4, $5)";
  if (const auto* libpq = dynamic_cast<const LibpqTransaction*>(&appTx)) {
    runInLibpqTransaction(
        *libpq, contextOf("commitLock", key), schema, call,
        {key.key.c_str(), tokenText.c_str(), ancestors.c_str(),
         boundOrNull(key.descendantsBegin), boundOrNull(key.descendantsEnd)});
    return;
  }
  pqxx::transaction_base& tx = openTransaction(appTx, "commitLock", key);
  // Not prepared: that would leave a statement behind on the application's
  // connection. Schema-qualified because that connection's search_path need
  // not name dlm's schema (the function pins its own).
  runInTransaction(tx, "commitLock", key,
                   "SELECT " + tx.conn().quote_name(schema) + "." + call,
                   key.key, tokenText, ancestors,
                   boundOrNull(key.descendantsBegin),
                   boundOrNull(key.descendantsEnd));
}

void guardInAppTransaction(AppTransaction& appTx, const std::string& schema,
                           const StoreKey& key, std::string_view token,
                           LockMode mode) {
  const std::string tokenText(token);
  const std::string call = "dlm_guard_within($1, $2, $3)";
  const bool shared = mode == LockMode::SHARED;
  if (const auto* libpq = dynamic_cast<const LibpqTransaction*>(&appTx)) {
    // Text parameters: the function's boolean reads 'true' / 'false'.
    runInLibpqTransaction(
        *libpq, contextOf("guardWithin", key), schema, call,
        {key.key.c_str(), tokenText.c_str(), shared ? "true" : "false"});
    return;
  }
  pqxx::transaction_base& tx = openTransaction(appTx, "guardWithin", key);
  runInTransaction(tx, "guardWithin", key,
                   "SELECT " + tx.conn().quote_name(schema) + "." + call,
                   key.key, tokenText, shared);
}

}  // namespace dlm::internal
