// The application's open transaction on a plain libpq connection
// (LibpqTransaction): the one statement of commitLock or guardWithin, run
// on it with libpq's blocking calls.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlm/postgres_store.h"

namespace dlm::internal {

// Runs "SELECT <schema>.<call>" (`call`: a dlm function and its parameters,
// "dlm_guard_within($1, $2, $3)") with the text `params` (nullptr = NULL)
// in the transaction open on `tx`'s connection. `context` starts every
// message ("PostgreSQL store: guardWithin <key>").
//
// Sends nothing and throws INVALID_ARGUMENT unless the connection is idle in
// an open transaction (PQTRANS_INTRANS, not in pipeline mode), and
// CONNECTION_ERROR (transient) when it is broken. A failed statement is
// translated as the store's own calls are (translatePgError: DLM01 is
// LOCK_NOT_HELD, 55P03 RETRIES_EXHAUSTED, ...) and leaves the transaction
// failed, so it cannot commit.
void runInLibpqTransaction(const LibpqTransaction& tx, std::string_view context,
                           const std::string& schema, std::string_view call,
                           const std::vector<const char*>& params);

}  // namespace dlm::internal
