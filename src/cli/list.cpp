// dlmctl list, show and waiters: who holds which lock and who waits, for
// operators (tables) and scripts (--json).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "commands.h"
#include "key_lookup.h"
#include "hold_summary.h"
#include "lock_json.h"
#include "output_text.h"
#include "table.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {
namespace {

// The whole of a read-only command, connecting included, runs within one
// operation timeout.
DeadlineScope commandDeadline() {
  return DeadlineScope(deadlineAfter(LockConfiguration{}.operationTimeout));
}

std::map<std::string, std::vector<WaitRecord>> byKey(
    std::vector<WaitRecord> waiters) {
  std::map<std::string, std::vector<WaitRecord>> out;
  for (WaitRecord& w : waiters) out[w.key].push_back(std::move(w));
  return out;
}

const std::vector<WaitRecord>& waitersOf(
    const std::map<std::string, std::vector<WaitRecord>>& waiters,
    const std::string& key) {
  static const std::vector<WaitRecord> kNone;
  const auto it = waiters.find(key);
  return it == waiters.end() ? kNone : it->second;
}

std::string waitersTable(const std::vector<WaitRecord>& waiters,
                         StoreTime now) {
  const bool logins = anyLogin(waiters);
  // DEADLINE: when the waiter gives up ("-": none, or not recorded);
  // LEASE: how long its request row counts unless the waiter renews it.
  Table table(keyHeader(
      withLogin({"MODE", "OWNER", "WAITING SINCE (UTC)", "FOR",
                 "DEADLINE (UTC)", "LEASE"},
                logins, "LOGIN")));
  for (const WaitRecord& w : waiters) {
    const auto lease = std::chrono::duration_cast<std::chrono::milliseconds>(
        w.expiresAt - now);
    table.add(keyRow(
        w.key,
        withLogin({lockModeName(w.mode), printable(w.owner),
                   formatUtc(w.requestedAt), formatElapsed(w.requestedAt, now),
                   w.deadline ? formatUtc(*w.deadline) : std::string("-"),
                   formatDuration(std::max(lease, std::chrono::milliseconds(0)))},
                  logins, loginText(w.login))));
  }
  return table.render();
}

// How many of `waiters` the hold `r` keeps waiting: requests for its key,
// an ancestor or a descendant whose mode conflicts with the hold's (SHARED
// only with EXCLUSIVE). An expired hold blocks nobody. `waiterKeys[i]` is
// waiters[i]'s key taken apart (parseStoreKey).
std::size_t blockedBy(const LockRecord& r,
                      const std::vector<WaitRecord>& waiters,
                      const std::vector<StoreKey>& waiterKeys) {
  std::size_t n = 0;
  const std::vector<LockRecord> hold = {r};
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    if (firstBlocker(hold, waiterKeys[i], waiters[i].mode)) ++n;
  }
  return n;
}

// The columns of a hold in list's and show's tables, and a hold's cells
// (LOGIN after MODE and OWNER when `logins`).
std::vector<std::string> holdHeader(bool logins) {
  return withLogin({"MODE", "OWNER", "HOST*", "PID*", "IP", "FENCING",
                    "ACQUIRED (UTC)", "EXPIRES (UTC)", "REMAINING"},
                   logins, "LOGIN");
}
std::vector<std::string> holdCells(const LockRecord& r, StoreTime now,
                                   bool logins) {
  return withLogin({lockModeName(r.mode), printable(r.owner),
                    printable(r.holder.host), std::to_string(r.holder.pid),
                    r.holderIp.empty() ? "-" : printable(r.holderIp),
                    std::to_string(r.fencingToken), formatUtc(r.acquiredAt),
                    formatUtc(r.expiresAt), formatRemaining(r, now)},
                   logins, loginText(r.login));
}

// One row per hold of one key, for show.
std::string holdersTable(const std::vector<LockRecord>& holders,
                         StoreTime now) {
  const bool logins = anyLogin(holders);
  Table table(holdHeader(logins));
  for (const LockRecord& r : holders) table.add(holdCells(r, now, logins));
  return table.render();
}

}  // namespace

int runList(const GlobalOptions& global, const ListOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const std::vector<LockRecord> records =
      adminOf(*store).listHeld(options.prefix);
  const std::vector<WaitRecord> requests =
      adminOf(*store).listWaiters(options.prefix);
  const StoreTime now = store->now();
  store->close();
  const auto waiters = byKey(requests);
  std::vector<StoreKey> requestKeys;
  for (const WaitRecord& w : requests) {
    requestKeys.push_back(parseStoreKey(w.key));
  }

  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const LockRecord& r : records) {
      nlohmann::json hold = lockJson(r, now, waitersOf(waiters, r.key));
      hold["blocked_waiters"] = blockedBy(r, requests, requestKeys);
      out.push_back(std::move(hold));
    }
    fmt::print("{}", renderJson(out));
    return 0;
  }
  if (records.empty()) {
    fmt::print("no held locks{}\n",
               options.prefix.empty() ? ""
                                      : fmt::format(" with prefix '{}'",
                                                    printable(options.prefix)));
    return 0;
  }
  const bool logins = anyLogin(records);
  std::vector<std::string> header = holdHeader(logins);
  header.push_back("WAITERS");
  Table table(keyHeader(std::move(header)));
  for (const LockRecord& r : records) {
    std::vector<std::string> cells = holdCells(r, now, logins);
    cells.push_back(std::to_string(blockedBy(r, requests, requestKeys)));
    table.add(keyRow(r.key, std::move(cells)));
  }
  fmt::print("{}", table.render());
  // Counted as top counts them (hold_summary.h).
  fmt::print("{}; {} waiting request{} (dlmctl waiters)\n",
             holdCountText(countHolds(records)), requests.size(),
             requests.size() == 1 ? "" : "s");
  return 0;
}

int runWaiters(const GlobalOptions& global, const ListOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const std::vector<WaitRecord> waiters =
      adminOf(*store).listWaiters(options.prefix);
  const StoreTime now = store->now();
  store->close();

  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const WaitRecord& w : waiters) out.push_back(waiterJson(w, now));
    fmt::print("{}", renderJson(out));
    return 0;
  }
  if (waiters.empty()) {
    fmt::print("no waiting requests\n");
    return 0;
  }
  fmt::print("{}", waitersTable(waiters, now));
  return 0;
}

int runShow(const GlobalOptions& global, const ShowOptions& options) {
  const std::string key = resolveStoreKey(global, options.key, options.xdc);
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const std::optional<LockRecord> row = adminOf(*store).describe(key);
  const std::vector<LockRecord> holders = adminOf(*store).holdersOf(key);
  std::vector<WaitRecord> waiters;
  for (WaitRecord& w : adminOf(*store).listWaiters(key)) {
    if (w.key == key) waiters.push_back(std::move(w));
  }
  // Nothing under this name: the same id held under another level, farm or
  // client (a short id resolved under dlmctl's defaults, or a key mistyped).
  std::vector<std::string> elsewhere;
  if (!row && holders.empty() && !options.json) {
    elsewhere = heldElsewhere(adminOf(*store), key);
  }
  const StoreTime now = store->now();
  store->close();

  if (!row && holders.empty()) {
    if (options.json) {
      fmt::print("null\n");
    } else if (elsewhere.empty()) {
      fmt::print("{}: never locked\n", keyText(key));
    } else {
      fmt::print("{}: not locked under this name\n{}", keyText(key),
                 heldElsewhereText(elsewhere, "show"));
    }
    return 1;
  }
  // The fields describe the first holder (the EXCLUSIVE one, else the
  // oldest SHARED one), or the key's row when nobody holds it.
  const LockRecord& r = holders.empty() ? *row : holders.front();
  if (options.json) {
    nlohmann::json out = lockJson(r, now, waiters);
    nlohmann::json all = nlohmann::json::array();
    for (const LockRecord& h : holders) all.push_back(holdJson(h, now));
    out["holders"] = std::move(all);
    fmt::print("{}", renderJson(out));
    return 0;
  }
  const auto live = std::count_if(holders.begin(), holders.end(),
                                  [](const LockRecord& h) { return h.held; });
  std::string state = r.held         ? "HELD"
                      : r.statusHeld ? "HELD, EXPIRED (free to take)"
                                     : "FREE";
  if (holders.size() > 1) {
    state = fmt::format("HELD by {} holders, {} of them live", holders.size(),
                        live);
  }
  Table table({"FIELD", "VALUE"});
  const KeyParts parts = splitStoreKey(r.key);
  table.add({"key", keyText(r.key)});
  table.add({"id", printable(parts.id)});
  table.add({"level", parts.level.empty() ? "-" : parts.level});
  if (!parts.farm.empty()) table.add({"farm", printable(parts.farm)});
  table.add({"client", parts.client.empty() ? "-" : printable(parts.client)});
  table.add({"state", state});
  if (holders.size() <= 1) {
    if (r.statusHeld) table.add({"mode", lockModeName(r.mode)});
    table.add({r.statusHeld ? "owner" : "last owner", printable(r.owner)});
    if (!r.login.empty()) {
      table.add({r.statusHeld ? "login" : "last login", printable(r.login)});
    }
    table.add({"host (reported)", printable(r.holder.host)});
    table.add({"pid (reported)", std::to_string(r.holder.pid)});
    table.add({"ip", r.holderIp.empty() ? "-" : printable(r.holderIp)});
    table.add({"fencing token", std::to_string(r.fencingToken)});
    table.add({"acquired (UTC)", formatUtc(r.acquiredAt)});
    table.add({"expires (UTC)", formatUtc(r.expiresAt)});
    table.add({"ttl", formatDuration(r.ttl)});
    if (r.statusHeld) table.add({"remaining", formatRemaining(r, now)});
  }
  table.add({"waiters", std::to_string(waiters.size())});
  // The header row is for the tables below; this one reads as a list.
  const std::string fields = table.render();
  fmt::print("{}", fields.substr(fields.find('\n') + 1));
  if (holders.size() > 1) fmt::print("\n{}", holdersTable(holders, now));
  if (!waiters.empty()) fmt::print("\n{}", waitersTable(waiters, now));
  return 0;
}

}  // namespace dlm::cli
