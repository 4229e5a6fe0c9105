#include "postgres/release_hints.h"

#include <algorithm>
#include <utility>

namespace dlm::internal {
namespace {

constexpr std::string_view kPayloadPrefix = "1 ";

// Removes one (hint, key) pair from `index`.
void erasePair(std::unordered_multimap<std::string, std::string>& index,
               const std::string& hint, const std::string& key) {
  auto [first, last] = index.equal_range(hint);
  for (auto it = first; it != last; ++it) {
    if (it->second == key) {
      index.erase(it);
      return;
    }
  }
}

void addKeysOf(const std::unordered_multimap<std::string, std::string>& index,
               const std::string& hint, std::vector<std::string>& out) {
  auto [first, last] = index.equal_range(hint);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
}

}  // namespace

bool ReleaseHints::knows(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return entries_.count(key) > 0;
}

void ReleaseHints::expect(const std::string& key,
                          const std::vector<std::string>& hints) {
  if (hints.empty()) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.count(key) > 0) forget(key);
  Entry entry{hints.front(), {hints.begin() + 1, hints.end()}};
  byOwnHint_.emplace(entry.ownHint, key);
  for (const std::string& a : entry.ancestorHints) {
    byAncestorHint_.emplace(a, key);
  }
  entries_.emplace(key, std::move(entry));
  order_.push_back(key);
  while (entries_.size() > kMaxKeys && !order_.empty()) {
    const std::string oldest = order_.front();
    forget(oldest);
  }
}

void ReleaseHints::forget(const std::string& key) {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return;
  erasePair(byOwnHint_, it->second.ownHint, key);
  for (const std::string& a : it->second.ancestorHints) {
    erasePair(byAncestorHint_, a, key);
  }
  entries_.erase(it);
  order_.erase(std::find(order_.begin(), order_.end(), key));
}

std::vector<std::string> ReleaseHints::keysFreedBy(
    std::string_view payload) const {
  std::vector<std::string> keys;
  if (payload.substr(0, kPayloadPrefix.size()) != kPayloadPrefix) return keys;
  payload.remove_prefix(kPayloadPrefix.size());
  const std::lock_guard<std::mutex> lock(mutex_);
  bool first = true;
  while (!payload.empty()) {
    const std::size_t space = payload.find(' ');
    const std::string hint(payload.substr(0, space));
    payload.remove_prefix(space == std::string_view::npos ? payload.size()
                                                          : space + 1);
    if (first) {
      // The freed key: its waiters, and those of the keys below it.
      addKeysOf(byOwnHint_, hint, keys);
      addKeysOf(byAncestorHint_, hint, keys);
      first = false;
    } else {
      // An ancestor of the freed key: its waiters.
      addKeysOf(byOwnHint_, hint, keys);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

}  // namespace dlm::internal
