#include "output_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <iterator>
#include <vector>

namespace dlm::cli {

namespace {

// "YYYY-MM-DD<sep>hh:mm:ss.mmm" of t in UTC.
std::string formatUtcWith(StoreTime t, char sep) {
  using namespace std::chrono;
  const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
  // Floor division so instants before 1970 still print sensibly.
  std::int64_t secs = ms / 1000;
  std::int64_t frac = ms % 1000;
  if (frac < 0) {
    frac += 1000;
    secs -= 1;
  }
  const std::time_t tt = static_cast<std::time_t>(secs);
  std::tm tm{};
  if (gmtime_r(&tt, &tm) == nullptr) return fmt::format("@{} ms", ms);
  return fmt::format("{:04}-{:02}-{:02}{}{:02}:{:02}:{:02}.{:03}",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, sep,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

}  // namespace

std::string formatUtc(StoreTime t) { return formatIso8601(t); }

std::string formatIso8601(StoreTime t) { return formatUtcWith(t, 'T') + "Z"; }

KeyParts splitStoreKey(const std::string& storeKey) {
  KeyParts parts;
  const bool dc = storeKey.rfind("DC#", 0) == 0;
  const bool xdc = storeKey.rfind("XDC#", 0) == 0;
  const std::size_t fields = dc ? 3 : xdc ? 2 : 0;
  std::vector<std::string> scope;  // level, [farm,] client
  std::size_t at = 0;
  for (std::size_t i = 0; i < fields; ++i) {
    const std::size_t hash = storeKey.find('#', at);
    if (hash == std::string::npos) break;
    scope.push_back(storeKey.substr(at, hash - at));
    at = hash + 1;
  }
  if (fields == 0 || scope.size() != fields) {
    parts.id = storeKey;
    return parts;
  }
  parts.level = scope[0];
  if (dc) parts.farm = scope[1];
  parts.client = scope.back();
  parts.id = storeKey.substr(at);
  return parts;
}

std::string keyText(const std::string& storeKey) { return printable(storeKey); }

std::string keyText(const std::string& storeKey, LockMode mode) {
  return fmt::format("{} ({})", printable(storeKey), lockModeName(mode));
}

std::vector<std::string> keyRow(const std::string& storeKey,
                                std::vector<std::string> rest) {
  std::vector<std::string> row = {printable(storeKey)};
  row.insert(row.end(), std::make_move_iterator(rest.begin()),
             std::make_move_iterator(rest.end()));
  return row;
}

std::vector<std::string> keyHeader(std::vector<std::string> rest) {
  std::vector<std::string> row = {"KEY"};
  row.insert(row.end(), std::make_move_iterator(rest.begin()),
             std::make_move_iterator(rest.end()));
  return row;
}

std::vector<std::string> withLogin(std::vector<std::string> cells, bool show,
                                   std::string cell) {
  if (!show) return cells;
  const auto at =
      static_cast<std::ptrdiff_t>(std::min<std::size_t>(2, cells.size()));
  cells.insert(cells.begin() + at, std::move(cell));
  return cells;
}

std::string loginText(const std::string& login) {
  return login.empty() ? std::string("-") : printable(login);
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  return out;
}

std::string formatDuration(std::chrono::milliseconds d) {
  const std::int64_t ms = d.count();
  if (ms < 0) return "-" + formatDuration(std::chrono::milliseconds(-ms));
  if (ms < 1000) return fmt::format("{} ms", ms);
  if (ms < 60'000)
    return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000);
  if (ms < 3'600'000) {
    return fmt::format("{} min {} s", ms / 60'000, (ms % 60'000) / 1000);
  }
  return fmt::format("{} h {} min", ms / 3'600'000, (ms % 3'600'000) / 60'000);
}

std::string formatElapsed(StoreTime from, StoreTime to) {
  return formatDuration(std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(to - from)));
}

std::string formatRemaining(const LockRecord& record, StoreTime now) {
  if (!record.held) return "EXPIRED";
  return formatElapsed(now, record.expiresAt);
}

}  // namespace dlm::cli
