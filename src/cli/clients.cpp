// dlmctl clients, clients bind, clients unbind: which clientId (key
// namespace) is bound to which database role, and the DBA's changes to it.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "lock_json.h"
#include "output_text.h"
#include "table.h"
#include "dlm/deadline.h"
#include "dlm/lock_configuration.h"

namespace dlm::cli {
namespace {

// Each command, connecting included, within one operation timeout.
DeadlineScope commandDeadline() {
  return DeadlineScope(deadlineAfter(LockConfiguration{}.operationTimeout));
}

// The hierarchy column: what the clientId's first acquire recorded.
std::string hierarchyText(const ClientBinding& b) {
  if (!b.hierarchy) return "-";
  if (!*b.hierarchy) return "off";
  if (!b.separator) return "on";
  return fmt::format("on, separator '{}'",
                     printable(std::string(1, *b.separator)));
}

// {"client_id", "role", "first_use", "bound_by", "bound_at", "separator",
// "hierarchy"}: separator and hierarchy are null until recorded.
nlohmann::json clientJson(const ClientBinding& b) {
  nlohmann::json out = {{"client_id", b.clientId},
                        {"role", b.role},
                        {"first_use", b.firstUse},
                        {"bound_by", b.boundBy},
                        {"bound_at", formatIso8601(b.boundAt)},
                        {"separator", nullptr},
                        {"hierarchy", nullptr}};
  if (b.separator) out["separator"] = std::string(1, *b.separator);
  if (b.hierarchy) out["hierarchy"] = *b.hierarchy;
  return out;
}

// "N things" / "1 thing".
std::string count(std::int64_t n, const char* thing) {
  return fmt::format("{} {}{}", n, thing, n == 1 ? "" : "s");
}

// The purge's line: what it ended under the client.
std::string purgeText(const std::string& client, const ClientPurge& p) {
  return fmt::format(
      "{}: purged: released {} ({} EXCLUSIVE, {} SHARED), cancelled {}, "
      "forgot its hierarchy setting\n",
      printable(client), count(p.holds + p.sharedHolds, "hold"), p.holds,
      p.sharedHolds, count(p.requests, "waiting request"));
}

// {"holds", "shared_holds", "requests"}.
nlohmann::json purgeJson(const ClientPurge& p) {
  return {{"holds", p.holds},
          {"shared_holds", p.sharedHolds},
          {"requests", p.requests}};
}

// unbind --purge: purgeClient, its line printed at once in text (so that
// it shows even when the unbind after it fails); nullopt without --purge.
std::optional<ClientPurge> purgeIfAsked(LockStoreAdmin& admin,
                                        const ClientsOptions& options) {
  if (!options.purge) return std::nullopt;
  const ClientPurge p = admin.purgeClient(options.clientId);
  if (!options.json) {
    fmt::print("{}", purgeText(options.clientId, p));
    // Before an error of the bind or unbind on stderr.
    std::fflush(stdout);
  }
  return p;
}

}  // namespace

int runClients(const GlobalOptions& global, const ClientsOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const std::vector<ClientBinding> bindings = adminOf(*store).listClients();
  store->close();

  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const ClientBinding& b : bindings) out.push_back(clientJson(b));
    fmt::print("{}", renderJson(out));
    return 0;
  }
  if (bindings.empty()) {
    fmt::print("no clients are bound\n");
    return 0;
  }
  Table table(
      {"CLIENT", "ROLE", "BOUND", "BOUND BY", "BOUND AT (UTC)", "HIERARCHY"});
  for (const ClientBinding& b : bindings) {
    table.add({printable(b.clientId), printable(b.role),
               b.firstUse ? "first use" : "admin", printable(b.boundBy),
               formatUtc(b.boundAt), hierarchyText(b)});
  }
  fmt::print("{}", table.render());
  return 0;
}

// With --purge, one call binds and ends what logins outside the role hold
// or wait for under the clientId (rebindClient): a squatter keeps nothing,
// the role's members keep theirs, and running it again is safe.
int runClientsBind(const GlobalOptions& global, const ClientsOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  std::optional<ClientPurge> purged;
  if (options.purge) {
    purged = adminOf(*store).rebindClient(options.clientId, options.role);
  } else {
    adminOf(*store).bindClient(options.clientId, options.role);
  }
  store->close();
  if (options.json) {
    // --json comes with --purge only (command_set.cpp).
    const nlohmann::json out = {{"client_id", options.clientId},
                                {"role", options.role},
                                {"purged", purgeJson(*purged)}};
    fmt::print("{}", renderJson(out));
    return 0;
  }
  if (purged) fmt::print("{}", purgeText(options.clientId, *purged));
  fmt::print("{}: bound to role {}\n", printable(options.clientId),
             printable(options.role));
  return 0;
}

int runClientsUnbind(const GlobalOptions& global,
                     const ClientsOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const std::optional<ClientPurge> purged =
      purgeIfAsked(adminOf(*store), options);
  const bool wasBound = adminOf(*store).unbindClient(options.clientId);
  store->close();
  if (options.json) {
    const nlohmann::json out = {{"client_id", options.clientId},
                                {"was_bound", wasBound},
                                {"purged", purgeJson(*purged)}};
    fmt::print("{}", renderJson(out));
    return wasBound ? 0 : 1;
  }
  if (!wasBound) {
    fmt::print("{}: was not bound{}\n", printable(options.clientId),
               purged ? "" : "; nothing changed");
    return 1;
  }
  fmt::print("{}: unbound (the next login that uses it is bound to it)\n",
             printable(options.clientId));
  return 0;
}

}  // namespace dlm::cli
