// dlm::PostgresStore: each operation is one prepared statement in autocommit
// on the store's own libpq connection (PgConn: every wait bounded by the
// call's deadline), calling a server function from schema/postgres.sql, so
// the function call is the whole transaction and one round trip: no BEGIN,
// no COMMIT. commitLock and guardWithin are the exceptions: they run in the
// application's own transaction, libpqxx or libpq (pg_app_transaction).
// Release notifications come from a PgReleaseChannel (its own connection and
// thread).
#include <utility>

#include "dlm/lock_key.h"
#include "dlm/postgres_store.h"
#include "postgres/owner_digest.h"
#include "postgres/pg_admin_calls.h"
#include "postgres/pg_results.h"
#include "postgres/pg_store_impl.h"

namespace dlm {

using internal::PgConn;

namespace {

// The options of the listening connection: listenConnection's server, the
// rest as configured.
PostgresStoreOptions listenOptions(PostgresStoreOptions options) {
  if (!options.listenConnection.empty()) {
    options.connection = options.listenConnection;
  }
  return options;
}

}  // namespace

PostgresStore::Impl::Impl(PostgresStoreOptions options)
    : options_(std::move(options)),
      sessions_(options_),
      listenSessions_(listenOptions(options_)),
      pool_(options_.poolSize, options_.poolWait,
            [this](Deadline d) {
              auto conn = sessions_.openForStore(d);
              // First-use bindings become the listeners' warnings (run).
              conn->keepNotices(internal::kFirstUseBindingState);
              // The first connection that works after one died.
              if (connectionLost_.exchange(false)) {
                reconnections_.fetch_add(1, std::memory_order_relaxed);
              }
              return conn;
            }),
      releases_(
          [this](Deadline d, int wakeFd) {
            return listenSessions_.open(d, wakeFd);
          },
          options_.operationTimeout) {}

PostgresStore::PostgresStore(PostgresStoreOptions options) {
  if (options.poolSize == 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::poolSize must be at least 1");
  }
  if (options.poolWait.count() < 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::poolWait must not be negative");
  }
  if (options.rowLockWait.count() <= 0) {
    // lock_timeout = 0 would mean "wait forever".
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgresStoreOptions::rowLockWait must be positive");
  }
  if (options.operationTimeout.count() <= 0) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        "PostgresStoreOptions::operationTimeout must be positive");
  }
  impl_ = std::make_unique<Impl>(std::move(options));
}

PostgresStore::~PostgresStore() = default;

std::string_view PostgresStore::name() const { return "postgres"; }
std::string PostgresStore::listedOwner(std::string_view owner) const {
  return internal::pgOwnerDigest(owner);
}

void PostgresStore::addClient(std::string_view clientId) noexcept {
  try {
    impl_->addClient(clientId);
  } catch (...) {
    // Out of memory: the label is a courtesy to DBAs, not worth failing for.
  }
}
std::uint64_t PostgresStore::reconnections() const {
  return impl_->reconnections();
}
void PostgresStore::addWarningListener(
    StoreWarningListener* listener) noexcept {
  impl_->warnings().add(listener);
}
void PostgresStore::removeWarningListener(
    StoreWarningListener* listener) noexcept {
  impl_->warnings().remove(listener);
}

void PostgresStore::initialize(bool applyMigrations) {
  impl_->initialize(applyMigrations);
}
void PostgresStore::close() { impl_->close(); }
AcquireResult PostgresStore::tryAcquire(const AcquireRequest& request) {
  return impl_->tryAcquire(request);
}
bool PostgresStore::release(const StoreKey& key, std::string_view token,
                            LockMode mode) {
  return impl_->release(key, token, mode);
}
void PostgresStore::commitLock(AppTransaction& tx, const StoreKey& key,
                               std::string_view token, LockMode mode) {
  impl_->commitLock(tx, key, token, mode);
}

void PostgresStore::guardWithin(AppTransaction& tx, const StoreKey& key,
                                std::string_view token, LockMode mode) {
  impl_->guardWithin(tx, key, token, mode);
}
std::optional<StoreTime> PostgresStore::extend(std::string_view key,
                                               std::string_view token,
                                               std::chrono::milliseconds ttl,
                                               LockMode mode) {
  return impl_->extend(key, token, ttl, mode);
}
std::vector<AcquireOutcome> PostgresStore::tryAcquireEach(
    const std::vector<AcquireRequest>& requests) {
  return impl_->tryAcquireEach(requests);
}
std::vector<ReleaseOutcome> PostgresStore::releaseEach(
    const std::vector<ReleaseRequest>& requests) {
  return impl_->releaseEach(requests);
}
std::vector<ExtendOutcome> PostgresStore::extendEach(
    const std::vector<ExtendRequest>& requests) {
  return impl_->extendEach(requests);
}
AcquireAllResult PostgresStore::tryAcquireAll(
    const std::vector<AcquireRequest>& requests) {
  return impl_->tryAcquireAll(requests);
}
std::optional<LockRecord> PostgresStore::describe(std::string_view key) {
  return impl_->describe(key);
}
std::vector<LockRecord> PostgresStore::holdersOf(std::string_view key) {
  return impl_->holds("holdersOf", key, /*exact=*/true);
}
std::vector<LockRecord> PostgresStore::listHeld(std::string_view keyPrefix) {
  return impl_->holds("listHeld", keyPrefix, /*exact=*/false);
}
std::vector<WaitRecord> PostgresStore::listWaiters(std::string_view keyPrefix) {
  return impl_->listWaiters(keyPrefix);
}
SchemaState PostgresStore::schemaState() { return impl_->schemaState(); }
PurgeBatch PostgresStore::purgeIdle(std::chrono::milliseconds idleFor,
                                    int batchSize, bool dryRun) {
  return impl_->purgeIdle(idleFor, batchSize, dryRun);
}

bool PostgresStore::forceRelease(std::string_view key) {
  return impl_->forceRelease(key);
}
StoreTime PostgresStore::now() { return impl_->now(); }

int PostgresStore::cancelRequests(std::string_view key,
                                  std::optional<std::string_view> owner) {
  internal::checkCancelArguments(key, owner);
  return impl_->adminCall("cancelRequests", key, [&](PgConn& c, Deadline d) {
    return internal::pgCancelRequests(c, d, key, owner);
  });
}

std::vector<ClientBinding> PostgresStore::listClients() {
  return impl_->adminCall("listClients", "", internal::pgListClients);
}

void PostgresStore::bindClient(std::string_view clientId,
                               std::string_view role) {
  internal::checkBindArguments(clientId, role);
  impl_->adminCall("bindClient", clientId, [&](PgConn& c, Deadline d) {
    internal::pgBindClient(c, d, clientId, role);
  });
}

bool PostgresStore::unbindClient(std::string_view clientId) {
  validateClientId(clientId);
  return impl_->adminCall("unbindClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgUnbindClient(c, d, clientId);
  });
}

ClientPurge PostgresStore::rebindClient(std::string_view clientId,
                                        std::string_view role) {
  internal::checkBindArguments(clientId, role);
  return impl_->adminCall("rebindClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgRebindClient(c, d, clientId, role);
  });
}

ClientPurge PostgresStore::purgeClient(std::string_view clientId) {
  validateClientId(clientId);
  return impl_->adminCall("purgeClient", clientId, [&](PgConn& c, Deadline d) {
    return internal::pgPurgeClient(c, d, clientId);
  });
}

WaitRegistration PostgresStore::registerWait(const WaitRequest& request) {
  return impl_->registerWait(request);
}
void PostgresStore::unregisterWait(std::string_view key,
                                   std::string_view owner) {
  impl_->unregisterWait(key, owner);
}
bool PostgresStore::subscribeReleases(ReleaseListener* listener) {
  return impl_->subscribeReleases(listener);
}
void PostgresStore::unsubscribeReleases(ReleaseListener* listener) {
  impl_->unsubscribeReleases(listener);
}

}  // namespace dlm
