// dlmctl clients, clients bind, clients unbind: which clientId (key
// namespace) is bound to which database role, and the DBA's changes to it.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

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

int runClientsBind(const GlobalOptions& global, const ClientsOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  adminOf(*store).bindClient(options.clientId, options.role);
  store->close();
  fmt::print("{}: bound to role {}\n", printable(options.clientId),
             printable(options.role));
  return 0;
}

int runClientsUnbind(const GlobalOptions& global,
                     const ClientsOptions& options) {
  const DeadlineScope deadline = commandDeadline();
  auto store = openExistingStore(global);
  const bool wasBound = adminOf(*store).unbindClient(options.clientId);
  store->close();
  if (!wasBound) {
    fmt::print("{}: was not bound; nothing changed\n",
               printable(options.clientId));
    return 1;
  }
  fmt::print("{}: unbound (the next login that uses it is bound to it)\n",
             printable(options.clientId));
  return 0;
}

}  // namespace dlm::cli
