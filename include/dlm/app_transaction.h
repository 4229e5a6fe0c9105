// The application's own open database transaction, as commitLock takes it.
#pragma once

#include "dlm/export.h"

namespace dlm {

// Base of the store adapters that carry an application transaction into
// DistributedLockManager::commitLock: PostgresTransaction (postgres_store.h)
// wraps a pqxx::transaction_base&, LibpqTransaction (postgres_store.h) a
// PGconn* with an open transaction, SqliteTransaction (sqlite_store.h) a
// sqlite3* with an open transaction. An adapter borrows the transaction; the
// application still commits or rolls it back itself.
class DLM_API AppTransaction {
 public:
  AppTransaction(const AppTransaction&) = delete;
  AppTransaction& operator=(const AppTransaction&) = delete;
  virtual ~AppTransaction() = default;

 protected:
  AppTransaction() = default;
};

}  // namespace dlm
