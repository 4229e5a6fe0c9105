// Matches the PostgreSQL store's release notifications (schema 14 on) to the
// keys its waiters wait for. A NOTIFY dlm_release payload names no key: it
// is '1 ' and hints, the freed key's first, then its ancestors' (a hint is a
// keyed hash the server computes; dlm_release_hints gives a waiter those of
// its own key and its ancestors, after a tenancy check).
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace dlm::internal {

class ReleaseHints {
 public:
  // How many waited keys are remembered; the oldest is forgotten first (its
  // waiters, if any are left, then poll until the key is expected again).
  static constexpr std::size_t kMaxKeys = 4096;

  // Whether `key`'s hints are known.
  bool knows(const std::string& key) const;

  // Remembers the hints of `key`: its own first, then its ancestors'.
  void expect(const std::string& key, const std::vector<std::string>& hints);

  // The remembered keys that the release announced by `payload` may
  // unblock: the freed key itself or a key below it (the payload's first
  // hint is the key's or one of its ancestors'), or a key above it (one of
  // the payload's ancestor hints is the key's). None for a payload of
  // another form (a forged NOTIFY, an older schema).
  std::vector<std::string> keysFreedBy(std::string_view payload) const;

 private:
  struct Entry {
    std::string ownHint;
    std::vector<std::string> ancestorHints;
  };

  void forget(const std::string& key);

  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  // hint -> keys whose own hint it is / keys with an ancestor of that hint.
  std::unordered_multimap<std::string, std::string> byOwnHint_;
  std::unordered_multimap<std::string, std::string> byAncestorHint_;
};

}  // namespace dlm::internal
