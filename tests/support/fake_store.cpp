#include "support/fake_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/store_limits.h"
#include "dlm/error.h"

namespace dlm::test {

void FakeTransaction::commit() {
  if (doomed_) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       "the transaction cannot commit: a lock was lost");
  }
  for (auto& f : pending_) f();
  pending_.clear();
}

namespace {

// Whether `other` is `key`, an ancestor or a descendant of it.
bool onOnePath(const StoreKey& key, const std::string& other) {
  if (other == key.key) return true;
  if (std::find(key.ancestors.begin(), key.ancestors.end(), other) !=
      key.ancestors.end()) {
    return true;
  }
  return !key.descendantsBegin.empty() && other >= key.descendantsBegin &&
         other < key.descendantsEnd;
}

bool conflicts(LockMode a, LockMode b) {
  return a == LockMode::EXCLUSIVE || b == LockMode::EXCLUSIVE;
}

// The stores' default limits (dlm_limits' column defaults), refused as the
// stores refuse them.
const internal::StoreLimits kLimits{};

AcquireResult grantedAs(const LockRecord& r) {
  AcquireResult result;
  result.acquired = true;
  result.fencingToken = r.fencingToken;
  result.acquiredAt = r.acquiredAt;
  result.expiresAt = r.expiresAt;
  return result;
}

}  // namespace

StoreTime FakeStore::clock() const {
  if (!realTime_) return now_;
  return std::chrono::time_point_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now()) +
         offset_;
}

bool FakeStore::heldAt(const Row& row, StoreTime at) const {
  return row.record.statusHeld && row.record.expiresAt > at;
}

template <typename Fn>
void FakeStore::forRelated(const StoreKey& key, Fn&& fn) {
  auto visit = [&](const std::string& k) {
    auto it = rows_.find(k);
    if (it != rows_.end()) fn(it->first, it->second);
  };
  visit(key.key);
  for (const auto& a : key.ancestors) visit(a);
  if (key.descendantsBegin.empty()) return;
  for (auto it = rows_.lower_bound(key.descendantsBegin);
       it != rows_.end() && it->first < key.descendantsEnd; ++it) {
    fn(it->first, it->second);
  }
}

std::vector<std::pair<std::string, std::string>> FakeStore::blockers(
    const StoreKey& key, LockMode mode) {
  const StoreTime now = clock();
  std::vector<std::pair<std::string, std::string>> out;
  forRelated(key, [&](const std::string& k, const Row& row) {
    if (heldAt(row, now)) out.emplace_back(row.record.owner, k);
    if (mode != LockMode::EXCLUSIVE) return;
    for (const auto& hold : row.shared) {
      if (hold.record.expiresAt > now) out.emplace_back(hold.record.owner, k);
    }
  });
  return out;
}

std::vector<FakeStore::RequestId> FakeStore::queuedBefore(
    const StoreKey& key, LockMode mode, std::string_view owner,
    std::optional<StoreTime> since) {
  const StoreTime now = clock();
  std::vector<std::pair<StoreTime, RequestId>> ahead;
  for (const auto& [id, req] : requests_) {
    if (id.first == owner || req.expiresAt <= now ||
        !conflicts(mode, req.mode) || !onOnePath(key, id.second)) {
      continue;
    }
    if (since &&
        std::tie(req.requestedAt, id.first) >= std::tie(*since, owner)) {
      continue;
    }
    ahead.emplace_back(req.requestedAt, id);
  }
  std::sort(ahead.begin(), ahead.end());
  std::vector<RequestId> out;
  for (auto& entry : ahead) out.push_back(std::move(entry.second));
  return out;
}

AcquireResult FakeStore::tryAcquire(const AcquireRequest& request) {
  internal::checkAcquireLimits(kLimits, request.key, request.ttl);
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  AcquireResult result;
  const auto [slot, created] = rows_.try_emplace(request.key.key);
  Row& target = slot->second;
  if (created) target.record.fencingToken = fencingFloor_;
  target.record.key = request.key.key;
  // A retry with the token that already holds the key.
  if (target.record.statusHeld && target.token == request.token) {
    return grantedAs(target.record);
  }
  for (const auto& hold : target.shared) {
    if (hold.token == request.token) return grantedAs(hold.record);
  }
  const auto held = blockers(request.key, request.mode);
  if (!held.empty()) {
    result.blockedBy = held.front().second;
    return result;
  }
  std::optional<StoreTime> mine;
  if (auto own = requests_.find({std::string(request.owner), request.key.key});
      own != requests_.end() && own->second.expiresAt > now) {
    mine = own->second.requestedAt;
  }
  const auto ahead =
      queuedBefore(request.key, request.mode, request.owner, mine);
  if (!ahead.empty()) {
    result.queued = true;
    result.blockedBy = ahead.front().second;
    return result;
  }
  if (request.mode == LockMode::SHARED) {
    const auto live = std::count_if(
        target.shared.begin(), target.shared.end(),
        [&](const SharedHold& h) { return h.record.expiresAt > now; });
    internal::checkSharedHoldersLimit(kLimits, request.key.key, live);
  }
  // A waiter's request for the key ends with the grant (as in the stores).
  requests_.erase({std::string(request.owner), request.key.key});
  LockRecord& row = target.record;
  row.fencingToken = std::max(row.fencingToken, fencingFloor_) + 1;
  LockRecord granted;
  granted.key = request.key.key;
  granted.statusHeld = true;
  granted.owner = std::string(request.owner);
  granted.fencingToken = row.fencingToken;
  granted.acquiredAt = now;
  granted.ttl = request.ttl;
  granted.expiresAt = now + request.ttl;
  granted.holder = request.holder;
  granted.mode = request.mode;
  if (request.mode == LockMode::EXCLUSIVE) {
    // Every SHARED hold left on the key is expired: taken over.
    target.shared.clear();
    row = granted;
    target.token = std::string(request.token);
  } else {
    // An expired EXCLUSIVE holder is taken over.
    if (row.statusHeld) {
      row.statusHeld = false;
      target.token.clear();
    }
    target.shared.push_back(SharedHold{granted, std::string(request.token)});
  }
  return grantedAs(granted);
}

bool FakeStore::freeRow(std::string_view key, std::string_view token) {
  auto it = rows_.find(key);
  if (it == rows_.end() || it->second.token != token) return false;
  LockRecord& r = it->second.record;
  // A release ends the lease: the row is idle from now on (purgeIdle).
  if (r.statusHeld) r.expiresAt = std::min(r.expiresAt, clock());
  r.statusHeld = false;
  return true;
}

bool FakeStore::dropShared(std::string_view key, std::string_view token) {
  auto it = rows_.find(key);
  if (it == rows_.end()) return false;
  auto& holds = it->second.shared;
  auto hold =
      std::find_if(holds.begin(), holds.end(),
                   [&](const SharedHold& h) { return h.token == token; });
  if (hold == holds.end()) return false;
  holds.erase(hold);
  return true;
}

void FakeStore::announce(std::string_view key) {
  for (ReleaseListener* l : listeners_) l->released(key);
}

bool FakeStore::release(const StoreKey& key, std::string_view token,
                        LockMode mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool freed = mode == LockMode::SHARED ? dropShared(key.key, token)
                                              : freeRow(key.key, token);
  if (freed) announce(key.key);
  return freed;
}

void FakeStore::commitLock(AppTransaction& tx, const StoreKey& key,
                           std::string_view token, LockMode mode) {
  auto* fake = dynamic_cast<FakeTransaction*>(&tx);
  if (fake == nullptr) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "not a FakeTransaction");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key.key);
  bool holds = false;
  if (it != rows_.end()) {
    const Row& row = it->second;
    if (mode == LockMode::SHARED) {
      holds =
          std::any_of(row.shared.begin(), row.shared.end(),
                      [&](const SharedHold& h) { return h.token == token; });
    } else {
      holds = row.token == token && row.record.statusHeld;
    }
  }
  if (!holds) {
    fake->doomed_ = true;
    throw DLMException(ErrorCode::LOCK_NOT_HELD,
                       "the lock was taken over after it expired");
  }
  fake->pending_.push_back([this, k = key.key, t = std::string(token), mode] {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool freed =
        mode == LockMode::SHARED ? dropShared(k, t) : freeRow(k, t);
    if (freed) announce(k);
  });
}

void FakeStore::guardWithin(AppTransaction& tx, const StoreKey& key,
                            std::string_view token, LockMode mode) {
  auto* fake = dynamic_cast<FakeTransaction*>(&tx);
  if (fake == nullptr) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "not a FakeTransaction");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  auto it = rows_.find(key.key);
  bool holds = false;
  if (it != rows_.end()) {
    const Row& row = it->second;
    if (mode == LockMode::SHARED) {
      holds = std::any_of(row.shared.begin(), row.shared.end(),
                          [&](const SharedHold& h) {
                            return h.token == token &&
                                   h.record.expiresAt > now;
                          });
    } else {
      holds = row.token == token && row.record.statusHeld &&
              row.record.expiresAt > now;
    }
  }
  if (!holds) {
    fake->doomed_ = true;
    throw DLMException(ErrorCode::LOCK_NOT_HELD,
                       "the lock's lease ended or it was taken over");
  }
}

std::optional<StoreTime> FakeStore::extend(std::string_view key,
                                           std::string_view token,
                                           std::chrono::milliseconds ttl,
                                           LockMode mode) {
  internal::checkTtlLimit(kLimits, ttl);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end()) return std::nullopt;
  Row& row = it->second;
  if (mode == LockMode::SHARED) {
    for (auto& hold : row.shared) {
      if (hold.token == token) {
        hold.record.expiresAt = clock() + ttl;
        return hold.record.expiresAt;
      }
    }
    return std::nullopt;
  }
  if (row.token != token || !row.record.statusHeld) return std::nullopt;
  row.record.expiresAt = clock() + ttl;
  return row.record.expiresAt;
}

std::vector<LockRecord> FakeStore::holdersOf(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  std::vector<LockRecord> holds;
  auto it = rows_.find(key);
  if (it == rows_.end()) return holds;
  const Row& row = it->second;
  if (row.record.statusHeld) {
    holds.push_back(row.record);
    holds.back().held = heldAt(row, now);
  }
  for (const auto& hold : row.shared) {
    holds.push_back(hold.record);
    holds.back().held = hold.record.expiresAt > now;
  }
  return holds;
}

std::optional<LockRecord> FakeStore::describe(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end()) return std::nullopt;
  LockRecord r = it->second.record;
  r.held = heldAt(it->second, clock());
  return r;
}

std::vector<LockRecord> FakeStore::listHeld(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  std::vector<LockRecord> out;
  for (const auto& [key, row] : rows_) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    if (row.record.statusHeld) {
      out.push_back(row.record);
      out.back().held = heldAt(row, now);
    }
    for (const auto& hold : row.shared) {
      out.push_back(hold.record);
      out.back().held = hold.record.expiresAt > now;
    }
  }
  return out;
}

std::vector<WaitRecord> FakeStore::listWaiters(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  std::vector<WaitRecord> out;
  for (const auto& [id, req] : requests_) {
    const std::string& key = id.second;
    if (req.expiresAt <= now || key.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    // No logins in a fake store.
    out.push_back(WaitRecord{key, id.first, req.requestedAt, req.expiresAt,
                             req.mode, {}, req.deadline});
  }
  // requests_ is ordered by owner first: key order, then oldest first.
  std::sort(out.begin(), out.end(),
            [](const WaitRecord& a, const WaitRecord& b) {
              return std::tie(a.key, a.requestedAt, a.owner) <
                     std::tie(b.key, b.requestedAt, b.owner);
            });
  return out;
}

SchemaState FakeStore::schemaState() {
  std::lock_guard<std::mutex> lock(mutex_);
  return schema_;
}

void FakeStore::setSchemaState(SchemaState state) {
  std::lock_guard<std::mutex> lock(mutex_);
  schema_ = std::move(state);
}

PurgeBatch FakeStore::purgeIdle(std::chrono::milliseconds idleFor,
                                int batchSize, bool dryRun) {
  if (idleFor.count() < 0 || batchSize <= 0) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "purgeIdle needs idleFor >= 0 and batchSize > 0");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  const StoreTime idleSince = now - idleFor;
  PurgeBatch batch;
  for (auto it = rows_.begin(); it != rows_.end() && batch.rows < batchSize;) {
    const LockRecord& r = it->second.record;
    const bool sharedIdle = std::all_of(
        it->second.shared.begin(), it->second.shared.end(),
        [&](const SharedHold& h) { return h.record.expiresAt <= idleSince; });
    const bool idle = (!r.statusHeld || r.expiresAt <= now) &&
                      (r.fencingToken == 0 || r.expiresAt <= idleSince) &&
                      sharedIdle;
    const bool requested =
        std::any_of(requests_.begin(), requests_.end(), [&](const auto& entry) {
          return entry.first.second == it->first &&
                 entry.second.expiresAt > now;
        });
    if (!idle || requested) {
      ++it;
      continue;
    }
    ++batch.rows;
    if (dryRun) {
      ++it;
      continue;
    }
    fencingFloor_ = std::max(fencingFloor_, r.fencingToken);
    it = rows_.erase(it);
  }
  batch.fencingFloor = fencingFloor_;
  return batch;
}

bool FakeStore::forceRelease(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end()) return false;
  // Whoever holds it, in either mode.
  Row& row = it->second;
  const bool held = row.record.statusHeld || !row.shared.empty();
  row.record.statusHeld = false;
  row.shared.clear();
  return held;
}

int FakeStore::cancelRequests(std::string_view key,
                              std::optional<std::string_view> owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  int removed = 0;
  for (auto it = requests_.begin(); it != requests_.end();) {
    const bool match =
        it->first.second == key && (!owner || it->first.first == *owner);
    if (match) ++removed;
    it = match ? requests_.erase(it) : std::next(it);
  }
  // The waiters the removed requests held back may go first now.
  if (removed > 0) announce(key);
  return removed;
}

StoreTime FakeStore::now() {
  std::lock_guard<std::mutex> lock(mutex_);
  return clock();
}

std::vector<std::chrono::milliseconds> FakeStore::registeredWaits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return registeredWaits_;
}

WaitRegistration FakeStore::registerWait(const WaitRequest& request) {
  internal::checkKeyLimits(kLimits, request.key);
  std::lock_guard<std::mutex> lock(mutex_);
  registeredWaits_.push_back(request.maxWait);
  const StoreTime now = clock();
  for (auto it = requests_.begin(); it != requests_.end();) {
    it = it->second.expiresAt <= now ? requests_.erase(it) : std::next(it);
  }
  const std::string me(request.owner);
  if (requests_.count({me, request.key.key}) == 0) {
    const auto mine = std::count_if(
        requests_.begin(), requests_.end(),
        [&](const auto& entry) { return entry.first.first == me; });
    internal::checkRequestsPerOwnerLimit(kLimits, mine);
  }
  // The request's age: kept when the owner re-registers.
  StoreTime since = now;
  if (auto own = requests_.find({me, request.key.key});
      own != requests_.end()) {
    since = own->second.requestedAt;
  }
  // The owners a request (key, mode, owner, age) waits for: holders of live
  // conflicting holds, and owners of older live conflicting requests.
  auto waitsFor = [&](const StoreKey& key, LockMode mode,
                      const std::string& owner, StoreTime age) {
    std::vector<std::string> owners;
    for (auto& [o, held] : blockers(key, mode)) {
      (void)held;
      owners.push_back(o);
    }
    for (auto& id : queuedBefore(key, mode, owner, age)) {
      owners.push_back(id.first);
    }
    return owners;
  };
  // Breadth-first over owners; each carries the key path that led to it.
  std::set<std::string> seen;
  std::vector<std::pair<std::string, std::vector<std::string>>> frontier;
  for (auto& o : waitsFor(request.key, request.mode, me, since)) {
    frontier.push_back({o, {request.key.key}});
  }
  while (!frontier.empty()) {
    std::vector<std::pair<std::string, std::vector<std::string>>> next;
    for (auto& [owner, path] : frontier) {
      if (owner == me) return WaitRegistration{path};
      if (!seen.insert(owner).second) continue;
      for (auto& [id, req] : requests_) {
        if (id.first != owner) continue;
        auto owners = waitsFor(req.key, req.mode, owner, req.requestedAt);
        // Blocked by its own owner: a cycle of one that ends that wait.
        if (std::find(owners.begin(), owners.end(), owner) != owners.end()) {
          continue;
        }
        for (auto& o : owners) {
          auto p = path;
          p.push_back(req.key.key);
          next.push_back({o, std::move(p)});
        }
      }
    }
    frontier = std::move(next);
  }
  // A repeated registration keeps when the wait began (as PostgreSQL does)
  // and moves the deadline.
  auto [it, fresh] = requests_.try_emplace({me, request.key.key});
  if (fresh) it->second.requestedAt = now;
  it->second.key = request.key;
  it->second.expiresAt = now + request.maxWait;
  it->second.mode = request.mode;
  it->second.deadline.reset();
  // None past 100 years, as the real stores record it.
  if (request.untilDeadline &&
      *request.untilDeadline <= std::chrono::hours(24 * 365 * 100)) {
    it->second.deadline = now + *request.untilDeadline;
  }
  return {};
}

void FakeStore::unregisterWait(std::string_view key, std::string_view owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find({std::string(owner), std::string(key)});
  if (it == requests_.end()) return;
  const Request gone = std::move(it->second);
  requests_.erase(it);
  // Live requests it held back may now go first: wake them.
  const StoreTime now = clock();
  const bool heldBack =
      std::any_of(requests_.begin(), requests_.end(), [&](const auto& entry) {
        return entry.first.first != owner && entry.second.expiresAt > now &&
               conflicts(gone.mode, entry.second.mode) &&
               onOnePath(gone.key, entry.first.second);
      });
  if (heldBack) announce(key);
}

bool FakeStore::subscribeReleases(ReleaseListener* listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!notifies_) return false;
  listeners_.insert(listener);
  return true;
}

void FakeStore::unsubscribeReleases(ReleaseListener* listener) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.erase(listener);
}

void FakeStore::addWarningListener(StoreWarningListener* listener) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    warningListeners_.insert(listener);
  } catch (...) {
    // Out of memory in a test: the listener hears nothing.
  }
}

void FakeStore::removeWarningListener(StoreWarningListener* listener) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  warningListeners_.erase(listener);
}

void FakeStore::warn(std::string_view message) {
  std::set<StoreWarningListener*> now;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now = warningListeners_;
  }
  for (StoreWarningListener* listener : now) listener->storeWarning(message);
}

std::vector<std::pair<std::string, std::string>> FakeStore::requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime now = clock();
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [id, req] : requests_) {
    if (req.expiresAt > now) out.push_back(id);
  }
  return out;
}

void FakeStore::advance(std::chrono::milliseconds by) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (realTime_) {
    offset_ += by;
  } else {
    now_ += by;
  }
}

}  // namespace dlm::test
