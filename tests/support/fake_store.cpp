#include "support/fake_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

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

bool FakeStore::heldAt(const Row& row, StoreTime at) const {
  return row.record.statusHeld && row.record.expiresAt > at;
}

AcquireResult FakeStore::tryAcquire(const AcquireRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  AcquireResult result;
  const auto [slot, created] = rows_.try_emplace(request.key.key);
  auto& target = slot->second;
  if (created) target.record.fencingToken = fencingFloor_;
  target.record.key = request.key.key;
  if (target.record.statusHeld && target.token == request.token) {
    result.acquired = true;
    result.fencingToken = target.record.fencingToken;
    result.acquiredAt = target.record.acquiredAt;
    result.expiresAt = target.record.expiresAt;
    return result;
  }
  auto blocked = [&](const std::string& key) {
    result.blockedBy = key;
    return result;
  };
  if (heldAt(target, now_)) return blocked(request.key.key);
  for (const auto& a : request.key.ancestors) {
    auto it = rows_.find(a);
    if (it != rows_.end() && heldAt(it->second, now_)) return blocked(a);
  }
  if (!request.key.descendantsBegin.empty()) {
    for (auto it = rows_.lower_bound(request.key.descendantsBegin);
         it != rows_.end() && it->first < request.key.descendantsEnd; ++it) {
      if (heldAt(it->second, now_)) return blocked(it->first);
    }
  }
  target.token = std::string(request.token);
  LockRecord& r = target.record;
  r.statusHeld = true;
  r.owner = std::string(request.owner);
  r.fencingToken += 1;
  r.acquiredAt = now_;
  r.ttl = request.ttl;
  r.expiresAt = now_ + request.ttl;
  r.holder = request.holder;
  result.acquired = true;
  result.fencingToken = r.fencingToken;
  result.acquiredAt = r.acquiredAt;
  result.expiresAt = r.expiresAt;
  return result;
}

bool FakeStore::freeRow(std::string_view key, std::string_view token) {
  auto it = rows_.find(key);
  if (it == rows_.end() || it->second.token != token) return false;
  it->second.record.statusHeld = false;
  return true;
}

void FakeStore::announce(std::string_view key) {
  for (ReleaseListener* l : listeners_) l->released(key);
}

bool FakeStore::release(const StoreKey& key, std::string_view token,
                        LockMode mode) {
  (void)mode;  // TEMPORARY (issue 11)
  std::lock_guard<std::mutex> lock(mutex_);
  const bool freed = freeRow(key.key, token);
  if (freed) announce(key.key);
  return freed;
}

void FakeStore::releaseWithin(AppTransaction& tx, const StoreKey& key,
                              std::string_view token, LockMode mode) {
  (void)mode;  // TEMPORARY (issue 11)
  auto* fake = dynamic_cast<FakeTransaction*>(&tx);
  if (fake == nullptr) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT, "not a FakeTransaction");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key.key);
  if (it == rows_.end() || it->second.token != token ||
      !it->second.record.statusHeld) {
    fake->doomed_ = true;
    throw DLMException(ErrorCode::LOCK_NOT_HELD,
                       "the lock was taken over after it expired");
  }
  fake->pending_.push_back([this, k = key.key, t = std::string(token)] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (freeRow(k, t)) announce(k);
  });
}

std::optional<StoreTime> FakeStore::extend(std::string_view key,
                                           std::string_view token,
                                           std::chrono::milliseconds ttl,
                                           LockMode mode) {
  (void)mode;  // TEMPORARY (issue 11)
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end() || it->second.token != token ||
      !it->second.record.statusHeld) {
    return std::nullopt;
  }
  it->second.record.expiresAt = now_ + ttl;
  return it->second.record.expiresAt;
}

std::vector<LockRecord> FakeStore::holdersOf(std::string_view key) {
  std::vector<LockRecord> holds;
  if (auto row = describe(key); row && row->statusHeld) {
    holds.push_back(std::move(*row));
  }
  return holds;
}

std::optional<LockRecord> FakeStore::describe(std::string_view key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end()) return std::nullopt;
  LockRecord r = it->second.record;
  r.held = heldAt(it->second, now_);
  return r;
}

std::vector<LockRecord> FakeStore::listHeld(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<LockRecord> out;
  for (const auto& [key, row] : rows_) {
    if (row.record.statusHeld && key.compare(0, prefix.size(), prefix) == 0) {
      out.push_back(row.record);
      out.back().held = heldAt(row, now_);
    }
  }
  return out;
}

std::vector<WaitRecord> FakeStore::listWaiters(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WaitRecord> out;
  for (const auto& [id, req] : requests_) {
    const std::string& key = id.second;
    if (req.expiresAt <= now_ || key.compare(0, prefix.size(), prefix) != 0) {
      continue;
    }
    out.push_back(WaitRecord{key, id.first, req.requestedAt, req.expiresAt});
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
  std::lock_guard<std::mutex> lock(mutex_);
  const StoreTime idleSince = now_ - idleFor;
  PurgeBatch batch;
  for (auto it = rows_.begin(); it != rows_.end() && batch.rows < batchSize;) {
    const LockRecord& r = it->second.record;
    const bool idle = (!r.statusHeld || r.expiresAt <= now_) &&
                      (r.fencingToken == 0 || r.expiresAt <= idleSince);
    const bool requested =
        std::any_of(requests_.begin(), requests_.end(), [&](const auto& entry) {
          return entry.first.second == it->first &&
                 entry.second.expiresAt > now_;
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
  if (it == rows_.end() || !it->second.record.statusHeld) return false;
  it->second.record.statusHeld = false;
  return true;
}

StoreTime FakeStore::now() {
  std::lock_guard<std::mutex> lock(mutex_);
  return now_;
}

std::vector<std::pair<std::string, std::string>> FakeStore::blockers(
    const StoreKey& key) {
  std::vector<std::pair<std::string, std::string>> out;
  auto consider = [&](const std::string& k) {
    auto it = rows_.find(k);
    if (it != rows_.end() && heldAt(it->second, now_)) {
      out.emplace_back(it->second.record.owner, k);
    }
  };
  consider(key.key);
  for (const auto& a : key.ancestors) consider(a);
  if (!key.descendantsBegin.empty()) {
    for (auto it = rows_.lower_bound(key.descendantsBegin);
         it != rows_.end() && it->first < key.descendantsEnd; ++it) {
      consider(it->first);
    }
  }
  return out;
}

WaitRegistration FakeStore::registerWait(const WaitRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = requests_.begin(); it != requests_.end();) {
    it = it->second.expiresAt <= now_ ? requests_.erase(it) : std::next(it);
  }
  // Breadth-first over owners; `via` remembers the key path to each.
  std::map<std::string, std::vector<std::string>> via;
  std::vector<std::pair<std::string, std::vector<std::string>>> frontier;
  for (auto& [owner, held] : blockers(request.key)) {
    (void)held;
    frontier.push_back({owner, {request.key.key}});
  }
  const std::string me(request.owner);
  while (!frontier.empty()) {
    std::vector<std::pair<std::string, std::vector<std::string>>> next;
    for (auto& [owner, path] : frontier) {
      if (owner == me) return WaitRegistration{path};
      if (!via.emplace(owner, path).second) continue;
      for (auto& [id, req] : requests_) {
        if (id.first != owner) continue;
        for (auto& [o, held] : blockers(req.key)) {
          (void)held;
          auto p = path;
          p.push_back(req.key.key);
          next.push_back({o, p});
        }
      }
    }
    frontier = std::move(next);
  }
  // A repeated registration keeps when the wait began (as PostgreSQL does)
  // and moves the deadline.
  auto [it, fresh] = requests_.try_emplace({me, request.key.key});
  if (fresh) it->second.requestedAt = now_;
  it->second.key = request.key;
  it->second.expiresAt = now_ + request.maxWait;
  return {};
}

void FakeStore::unregisterWait(std::string_view key, std::string_view owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  requests_.erase({std::string(owner), std::string(key)});
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

std::vector<std::pair<std::string, std::string>> FakeStore::requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [id, req] : requests_) {
    if (req.expiresAt > now_) out.push_back(id);
  }
  return out;
}

void FakeStore::advance(std::chrono::milliseconds by) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_ += by;
}

}  // namespace dlm::test
