#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "commands.h"
#include "output_text.h"
#include "dlm/error.h"
#include "dlm/lock_key.h"
#include "dlm/store_url.h"

namespace dlm::cli {

GlobalOptions settleDatabase(GlobalOptions global) {
  if (global.dbOrigin == "default") {
    // cli_args leaves the SQLite default in place; whether PG* variables
    // name a server instead is the library's rule, shared with openStore.
    const DefaultStoreUrl chosen = defaultStoreUrl();
    global.db = chosen.url;
    global.dbOrigin = chosen.origin;
  }
  std::string shown;
  try {
    shown = describeStoreUrl(global.db);
  } catch (const DLMException& e) {
    if (e.code() != ErrorCode::INVALID_ARGUMENT) throw;
    // The message is redacted and names the forms that would work.
    throw UsageError(fmt::format("{} (database from {})", e.what(),
                                 global.dbOrigin == "default"
                                     ? std::string("the default")
                                     : global.dbOrigin));
  }
  const std::string origin =
      global.dbOrigin == "default"
          ? "default: no --db, DLM_DATABASE_URL, PGHOST, PGHOSTADDR, "
            "PGDATABASE or PGSERVICE"
          : "from " + global.dbOrigin;
  global.dbNote = fmt::format("{} ({})", shown, origin);
  return global;
}

void warnOfPasswordOnCommandLine(const GlobalOptions& global) {
  if (global.dbOrigin != "--db" || global.verbosity == Verbosity::QUIET) return;
  if (!storeUrlHasPassword(global.db)) return;
  // Every local user can read a command line (ps, /proc/<pid>/cmdline).
  fmt::print(stderr,
             "dlmctl: warning: the password in --db can be read by every "
             "user of this host (ps); put it in ~/.pgpass or PGPASSWORD, or "
             "the whole URL in DLM_DATABASE_URL\n");
}

void announceDatabase(const GlobalOptions& global) {
  // Once: a failure after --verbose's announcement needs no second one.
  static bool announced = false;
  if (announced || global.dbNote.empty()) return;
  announced = true;
  // stderr: stdout stays the command's own output for scripts.
  fmt::print(stderr, "dlmctl: database: {}\n", global.dbNote);
}

std::string databaseText(const GlobalOptions& global,
                         std::string_view storeName, const std::string& extra) {
  std::string what = storeName == "sqlite"     ? "SQLite"
                     : storeName == "postgres" ? "PostgreSQL"
                                               : std::string(storeName);
  if (!global.schema.empty()) what += ", schema " + global.schema;
  if (!extra.empty()) what += ", " + extra;
  return fmt::format("{} ({})", describeStoreUrl(global.db), what);
}

namespace {

// The store's warnings (dlm_synchronous_replication=warn) on stderr, whether
// or not a manager reports events. Lives as long as the process.
class StderrWarnings final : public StoreWarningListener {
 public:
  void storeWarning(std::string_view message) override {
    fmt::print(stderr, "dlmctl: warning: {}\n", message);
  }
};

}  // namespace

std::shared_ptr<LockStore> openCliStore(const GlobalOptions& global) {
  static StderrWarnings warnings;
  auto store = openStore(global.db, global.schema);
  store->addWarningListener(&warnings);
  return store;
}

void requireExistingDatabase(const GlobalOptions& global) {
  const ParsedStoreUrl parsed = parseStoreUrl(global.db);
  if (parsed.kind != StoreKind::SQLITE || parsed.location == ":memory:") {
    return;
  }
  std::error_code ec;
  if (std::filesystem::exists(parsed.location, ec) || ec) return;
  throw std::runtime_error(fmt::format(
      "there is no database at {} (no such file; nothing was created). "
      "Name the database with --db, or create it with `dlmctl migrate`",
      describeStoreUrl(global.db)));
}

std::shared_ptr<LockStore> openExistingStore(const GlobalOptions& global) {
  requireExistingDatabase(global);
  auto store = openCliStore(global);
  // Only checks the version: reading must not change the schema.
  store->initialize(/*applyMigrations=*/false);
  return store;
}

std::unique_ptr<DistributedLockManager> openManager(
    const GlobalOptions& global, std::shared_ptr<LockStore> store,
    bool applyMigrations, const LockConfiguration& config,
    std::shared_ptr<LockEventHandler> events) {
  auto manager = DistributedLockManager::builder()
                     .clientId(global.client)
                     .farmId(global.farm)
                     .store(std::move(store))
                     .configuration(config)
                     .applyMigrations(applyMigrations)
                     .events(std::move(events))
                     .build();
  manager->initialize();
  return manager;
}

StoreKey scopedKey(const GlobalOptions& global, const std::string& id,
                   bool xdc) {
  // The library's own validation and key rules (no I/O).
  validateLockId(id);
  validateClientId(global.client);
  const LockLevel level = xdc ? LockLevel::XDC : LockLevel::DC;
  validateFarmId(global.farm, level);
  return lockStoreKey(level, {global.farm, global.client}, id);
}

std::string resolveStoreKey(const GlobalOptions& global,
                            const std::string& target, bool xdc) {
  const bool storeKey =
      target.rfind("DC#", 0) == 0 || target.rfind("XDC#", 0) == 0;
  if (!storeKey) return scopedKey(global, target, xdc).key;
  if (xdc) throw UsageError("--xdc is for lock ids, not store keys");
  return target;
}

namespace {

// Two modes conflict unless both are SHARED (lock_mode.h).
bool conflicts(LockMode wanted, LockMode other) {
  return wanted == LockMode::EXCLUSIVE || other == LockMode::EXCLUSIVE;
}

// Where `candidate` stands on `key`'s path: 0 the key itself, 1.. its
// ancestors root first, then its descendants; nullopt off the path.
std::optional<std::size_t> pathRank(const StoreKey& key,
                                    const std::string& candidate) {
  if (candidate == key.key) return 0;
  for (std::size_t i = 0; i < key.ancestors.size(); ++i) {
    if (candidate == key.ancestors[i]) return i + 1;
  }
  if (!key.descendantsBegin.empty() && candidate >= key.descendantsBegin &&
      candidate < key.descendantsEnd) {
    return key.ancestors.size() + 1;
  }
  return std::nullopt;
}

}  // namespace

KeyRelation relationOf(const StoreKey& key, const std::string& candidate) {
  const std::optional<std::size_t> rank = pathRank(key, candidate);
  if (!rank) return KeyRelation::UNRELATED;
  if (*rank == 0) return KeyRelation::SAME;
  return *rank <= key.ancestors.size() ? KeyRelation::ANCESTOR
                                       : KeyRelation::DESCENDANT;
}

StoreKey parseStoreKey(const std::string& storeKey) {
  StoreKey unrelated;
  unrelated.key = storeKey;
  const KeyParts parts = splitStoreKey(storeKey);
  if (parts.level.empty() || parts.id.empty()) return unrelated;
  LockKeyScope keyScope;
  keyScope.farmId = parts.farm;
  keyScope.clientId = parts.client;
  try {
    return lockStoreKey(parts.level == "DC" ? LockLevel::DC : LockLevel::XDC,
                        keyScope, parts.id);
  } catch (const DLMException&) {
    // An id with an empty segment: written by a manager with hierarchy off.
    return unrelated;
  }
}

std::optional<LockRecord> firstBlocker(const std::vector<LockRecord>& holds,
                                       const StoreKey& key, LockMode mode) {
  std::optional<std::size_t> best;
  std::optional<std::size_t> bestRank;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const LockRecord& r = holds[i];
    if (!r.held || !conflicts(mode, r.mode)) continue;
    const std::optional<std::size_t> rank = pathRank(key, r.key);
    if (rank && (!bestRank || *rank < *bestRank)) {
      best = i;
      bestRank = rank;
    }
  }
  if (!best) return std::nullopt;
  return holds[*best];
}

std::optional<WaitRecord> oldestQueuedAhead(
    const std::vector<WaitRecord>& requests, const StoreKey& key, LockMode mode,
    const std::string& self) {
  std::optional<std::size_t> oldest;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const WaitRecord& w = requests[i];
    if (w.owner == self || !conflicts(mode, w.mode) || !pathRank(key, w.key)) {
      continue;
    }
    if (!oldest || w.requestedAt < requests[*oldest].requestedAt) oldest = i;
  }
  if (!oldest) return std::nullopt;
  return requests[*oldest];
}

std::optional<LockRecord> findBlocker(LockStore& store, const StoreKey& key,
                                      LockMode mode) {
  // Nearest first, each level read only when the one before has no blocker.
  if (auto r = firstBlocker(adminOf(store).holdersOf(key.key), key, mode))
    return r;
  for (const std::string& ancestor : key.ancestors) {
    if (auto r = firstBlocker(adminOf(store).holdersOf(ancestor), key, mode))
      return r;
  }
  if (key.descendantsBegin.empty()) return std::nullopt;
  // Keys starting with key + separator are exactly the descendants.
  return firstBlocker(adminOf(store).listHeld(key.descendantsBegin), key, mode);
}

std::optional<WaitRecord> findQueuedAhead(LockStore& store, const StoreKey& key,
                                          LockMode mode,
                                          const std::string& self) {
  // The root's key is a prefix of every key on the path (and of others,
  // which oldestQueuedAhead drops).
  const std::string& root =
      key.ancestors.empty() ? key.key : key.ancestors.front();
  return oldestQueuedAhead(adminOf(store).listWaiters(root), key, mode,
                           store.listedOwner(self));
}

}  // namespace dlm::cli
