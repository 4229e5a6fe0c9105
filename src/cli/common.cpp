#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "cli/commands.h"
#include "dlm/error.h"
#include "dlm/store_url.h"
#include "key_builder.h"
#include "validation.h"

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
          ? "default: no --db, DLM_DATABASE_URL, PGHOST, PGDATABASE or "
            "PGSERVICE"
          : "from " + global.dbOrigin;
  // stderr: stdout stays the command's own output for scripts.
  fmt::print(stderr, "dlmctl: database: {} ({})\n", shown, origin);
  return global;
}

std::shared_ptr<LockStore> openCliStore(const GlobalOptions& global) {
  return openStore(global.db, global.schema);
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
  internal::validateLockId(id);
  internal::validateScopeName("clientId", global.client, true);
  const LockLevel level = xdc ? LockLevel::XDC : LockLevel::DC;
  internal::validateScopeName("farmId", global.farm, level == LockLevel::DC);
  return internal::buildStoreKey(level, {global.farm, global.client}, id);
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

// Whether `candidate` is `key` itself, an ancestor or a descendant of it.
bool onPath(const StoreKey& key, const std::string& candidate) {
  if (candidate == key.key) return true;
  for (const std::string& a : key.ancestors) {
    if (candidate == a) return true;
  }
  return !key.descendantsBegin.empty() && candidate >= key.descendantsBegin &&
         candidate < key.descendantsEnd;
}

}  // namespace

std::optional<LockRecord> findBlocker(LockStore& store, const StoreKey& key,
                                      LockMode mode) {
  auto firstConflicting =
      [mode](std::vector<LockRecord> holds) -> std::optional<LockRecord> {
    for (LockRecord& r : holds) {
      if (r.held && conflicts(mode, r.mode)) return std::move(r);
    }
    return std::nullopt;
  };
  if (auto r = firstConflicting(store.holdersOf(key.key))) return r;
  for (const std::string& ancestor : key.ancestors) {
    if (auto r = firstConflicting(store.holdersOf(ancestor))) return r;
  }
  if (key.descendantsBegin.empty()) return std::nullopt;
  // Keys starting with key + separator are exactly the descendants.
  return firstConflicting(store.listHeld(key.descendantsBegin));
}

std::optional<WaitRecord> findQueuedAhead(LockStore& store, const StoreKey& key,
                                          LockMode mode,
                                          const std::string& self) {
  // The root's key is a prefix of every key on the path (and of others,
  // which onPath drops).
  const std::string& root =
      key.ancestors.empty() ? key.key : key.ancestors.front();
  std::vector<WaitRecord> candidates;
  for (WaitRecord& w : store.listWaiters(root)) {
    if (w.owner != self && conflicts(mode, w.mode) && onPath(key, w.key)) {
      candidates.push_back(std::move(w));
    }
  }
  if (candidates.empty()) return std::nullopt;
  return *std::min_element(candidates.begin(), candidates.end(),
                           [](const WaitRecord& a, const WaitRecord& b) {
                             return a.requestedAt < b.requestedAt;
                           });
}

}  // namespace dlm::cli
