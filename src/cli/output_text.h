// Text forms for dlmctl's output: store instants, durations, and text from
// the database made safe for a terminal.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dlm/lock_store_admin.h"

namespace dlm::cli {

// "2024-05-01 12:00:00.123" (UTC, milliseconds).
std::string formatUtc(StoreTime t);

// "2024-05-01T12:00:00.123Z" (ISO 8601, UTC, milliseconds), for JSON.
std::string formatIso8601(StoreTime t);

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
