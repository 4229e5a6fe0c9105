// Text forms for dlmctl's output: store instants, durations, and text from
// the database made safe for a terminal.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "dlm/lock_store_admin.h"

namespace dlm::cli {

// "2024-05-01T12:00:00.123Z" (ISO 8601, UTC, milliseconds): every instant
// dlmctl prints, in tables, messages and JSON.
std::string formatUtc(StoreTime t);
std::string formatIso8601(StoreTime t);

// A store key taken apart: "DC#farm#client#id" or "XDC#client#id" (scope
// names never contain '#'; ids may). A key of neither form (not written by
// dlm) has `id` = the whole key and the other fields empty.
struct KeyParts {
  std::string level;  // "DC", "XDC", or "" for a key of no known form
  std::string farm;   // "" for XDC
  std::string client;
  std::string id;  // the lock id the application gave
};
KeyParts splitStoreKey(const std::string& storeKey);

// How people see a key: its canonical form, every coordinate in one
// copyable string that dlmctl takes back as printed (Lock::key()):
// "DC#default#dlmctl#jobs.a", "XDC#billing#nightly.import"; with `mode`,
// "DC#default#dlmctl#jobs.a (EXCLUSIVE)". Escaped as `printable`.
std::string keyText(const std::string& storeKey);
std::string keyText(const std::string& storeKey, LockMode mode);

// A table row that starts with the KEY column (keyText), then `rest`;
// keyHeader gives the header row to match.
std::vector<std::string> keyRow(const std::string& storeKey,
                                std::vector<std::string> rest);
std::vector<std::string> keyHeader(std::vector<std::string> rest);

// The LOGIN column of the hold and request tables: the database login that
// made each row (PostgreSQL, shown to the admin role only). A table has it
// only when some row has a login (anyLogin), after MODE and OWNER, the
// first two of its cells (withLogin: `cell` inserted there when `show`).
template <typename Record>
bool anyLogin(const std::vector<Record>& records) {
  for (const Record& r : records) {
    if (!r.login.empty()) return true;
  }
  return false;
}
std::vector<std::string> withLogin(std::vector<std::string> cells, bool show,
                                   std::string cell);
// A login as a cell: escaped (`printable`), "-" when there is none.
std::string loginText(const std::string& login);

// `text` with control characters escaped (\n, \t, \r, \xNN) and
// backslashes doubled, so that a key or host name from the database can
// neither break a table's rows nor drive the terminal.
std::string printable(std::string_view text);

// "850 ms", "12.5 s", "3 min 20 s", "2 h 5 min".
std::string formatDuration(std::chrono::milliseconds d);

// How long from `from` to `to` (formatDuration), never negative: how long a
// lock has been held or a request has waited.
std::string formatElapsed(StoreTime from, StoreTime to);

// A hold's time left at `now` (formatDuration), or "EXPIRED" when the store
// no longer counts it as held.
std::string formatRemaining(const LockRecord& record, StoreTime now);

}  // namespace dlm::cli
