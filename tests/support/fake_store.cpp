#include "support/fake_store.h"

namespace dlm::test {

bool FakeStore::heldAt(const Row& row, StoreTime at) const {
  return row.record.statusHeld && row.record.expiresAt > at;
}

AcquireResult FakeStore::tryAcquire(const AcquireRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  AcquireResult result;
  auto& target = rows_[request.key.key];
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

bool FakeStore::release(std::string_view key, std::string_view token) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end() || it->second.token != token) return false;
  it->second.record.statusHeld = false;
  return true;
}

std::optional<StoreTime> FakeStore::extend(std::string_view key,
                                           std::string_view token,
                                           std::chrono::milliseconds ttl) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = rows_.find(key);
  if (it == rows_.end() || it->second.token != token ||
      !it->second.record.statusHeld) {
    return std::nullopt;
  }
  it->second.record.expiresAt = now_ + ttl;
  return it->second.record.expiresAt;
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

void FakeStore::advance(std::chrono::milliseconds by) {
  std::lock_guard<std::mutex> lock(mutex_);
  now_ += by;
}

}  // namespace dlm::test
