// Text forms of store instants and durations for dlmctl's output.
#pragma once

#include <chrono>
#include <string>

#include "dlm/lock_store.h"

namespace dlm::cli {

// "2024-05-01 12:00:00.123" (UTC, milliseconds).
std::string formatUtc(StoreTime t);

// "850 ms", "12.5 s", "3 min 20 s", "2 h 5 min".
std::string formatDuration(std::chrono::milliseconds d);

}  // namespace dlm::cli
