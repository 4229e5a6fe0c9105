#include "key_lookup.h"

#include <fmt/format.h>

#include <algorithm>

#include "output_text.h"

namespace dlm::cli {

std::optional<LockCoordinates> coordinatesOf(const std::string& text) {
  const KeyParts parts = splitStoreKey(text);
  if (parts.level.empty() || parts.client.empty() || parts.id.empty()) {
    return std::nullopt;
  }
  if (parts.level == "DC" && parts.farm.empty()) return std::nullopt;
  LockCoordinates c;
  c.level = parts.level == "DC" ? LockLevel::DC : LockLevel::XDC;
  c.farm = parts.farm;
  c.client = parts.client;
  c.id = parts.id;
  return c;
}

std::vector<std::string> heldElsewhere(LockStoreAdmin& admin,
                                       const std::string& key,
                                       std::size_t limit) {
  const std::string id = splitStoreKey(key).id;
  std::vector<std::string> keys;
  for (const LockRecord& r : admin.listHeld("")) {
    if (!r.held || r.key == key || splitStoreKey(r.key).id != id) continue;
    if (std::find(keys.begin(), keys.end(), r.key) != keys.end()) continue;
    keys.push_back(r.key);
    if (keys.size() >= limit) break;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::string heldElsewhereText(const std::vector<std::string>& keys,
                              const std::string& command) {
  std::string out;
  for (const std::string& k : keys) out += fmt::format("  held as {}\n", keyText(k));
  if (!keys.empty()) {
    out += fmt::format("did you mean: dlmctl {} '{}'?\n", command,
                       keyText(keys.front()));
  }
  return out;
}

}  // namespace dlm::cli
