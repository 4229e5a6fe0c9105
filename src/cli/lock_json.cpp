#include "lock_json.h"

#include <algorithm>

#include "output_text.h"

namespace dlm::cli {

std::int64_t millisBetween(StoreTime from, StoreTime to) {
  return std::max<std::int64_t>(
      0,
      std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

namespace {

// "id", "level", "farm", "client": the key taken apart (null for what it
// has not: an XDC key has no farm).
void addKeyParts(nlohmann::json& out, const std::string& key) {
  const KeyParts p = splitStoreKey(key);
  const auto orNull = [](const std::string& s) {
    return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
  };
  out["id"] = p.id;
  out["level"] = orNull(p.level);
  out["farm"] = orNull(p.farm);
  out["client"] = orNull(p.client);
}

// A login, or null when the store gave none.
nlohmann::json loginJson(const std::string& login) {
  return login.empty() ? nlohmann::json(nullptr) : nlohmann::json(login);
}

}  // namespace

nlohmann::json holdJson(const LockRecord& r, StoreTime now) {
  const char* state = r.held ? "held" : r.statusHeld ? "expired" : "free";
  nlohmann::json out = {
      {"key", r.key},
      {"mode", lockModeName(r.mode)},
      {"state", state},
      {"owner", r.owner},
      {"host", r.holder.host},
      {"pid", r.holder.pid},
      {"ip", r.holderIp},
      {"fencing_token", r.fencingToken},
      {"acquired_at", formatIso8601(r.acquiredAt)},
      {"expires_at", formatIso8601(r.expiresAt)},
      {"ttl_ms", r.ttl.count()},
      // `held` is the store's verdict at query time; trust it over a
      // subtraction that uses a second reading of the clock.
      {"remaining_ms", r.held ? millisBetween(now, r.expiresAt) : 0},
      {"login", loginJson(r.login)}};
  addKeyParts(out, r.key);
  return out;
}

nlohmann::json lockJson(const LockRecord& r, StoreTime now,
                        const std::vector<WaitRecord>& waiters) {
  nlohmann::json w = nlohmann::json::array();
  for (const WaitRecord& waiter : waiters) w.push_back(waiterJson(waiter, now));
  nlohmann::json out = holdJson(r, now);
  out["waiters"] = std::move(w);
  return out;
}

nlohmann::json waiterJson(const WaitRecord& w, StoreTime now) {
  nlohmann::json out = {{"key", w.key},
                        {"mode", lockModeName(w.mode)},
                        {"owner", w.owner},
                        {"requested_at", formatIso8601(w.requestedAt)},
                        // The waiter's own; null when it has none or its
                        // library did not record it.
                        {"deadline", w.deadline ? nlohmann::json(formatIso8601(
                                                      *w.deadline))
                                                : nlohmann::json(nullptr)},
                        // The request row's lease, renewed while it waits.
                        {"lease_expires_at", formatIso8601(w.expiresAt)},
                        {"waited_ms", millisBetween(w.requestedAt, now)},
                        {"login", loginJson(w.login)}};
  addKeyParts(out, w.key);
  return out;
}

std::string renderJson(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace dlm::cli
