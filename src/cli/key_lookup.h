// Finding a lock by the name an operator typed: the canonical key as
// printed ("XDC#billing#nightly.import"), or a short id resolved under
// dlmctl's options; when that names nothing, the live holds of the same id
// under another level, farm or client, so that dlmctl can say "held as
// ..." instead of "never locked".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlm/lock.h"
#include "dlm/lock_store_admin.h"

namespace dlm::cli {

// The coordinates of a canonical key: "DC#<farm>#<client>#<id>" or
// "XDC#<client>#<id>", farm and client non-empty without '#', id non-empty.
struct LockCoordinates {
  LockLevel level = LockLevel::DC;
  std::string farm;  // "" for XDC
  std::string client;
  std::string id;
};

// nullopt for text that is not a canonical key (a short id).
std::optional<LockCoordinates> coordinatesOf(const std::string& text);

// The keys of live holds of the same id as `key` under another level, farm
// or client, in key order, at most `limit` of them (what the login may see:
// a client role sees its own clients', the admin role every one).
std::vector<std::string> heldElsewhere(LockStoreAdmin& admin,
                                       const std::string& key,
                                       std::size_t limit = 10);

// The lines that name them for a command: "  held as KEY" each, then
// "did you mean: dlmctl COMMAND 'KEY'?" for the first.
std::string heldElsewhereText(const std::vector<std::string>& keys,
                              const std::string& command);

}  // namespace dlm::cli
