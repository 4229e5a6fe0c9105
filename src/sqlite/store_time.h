// Times of the SQLite store: integer milliseconds since the Unix epoch by the
// application's clock, as the tables store them.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "dlm/lock_store.h"

namespace dlm::internal::sqlite {

// The latest instant a StoreTime can hold, in ms (system_clock counts
// nanoseconds on libstdc++: about the year 2262).
inline std::int64_t maxMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             StoreTime::max().time_since_epoch())
      .count();
}

inline StoreTime fromMs(std::int64_t ms) {
  return StoreTime(std::chrono::duration_cast<StoreTime::duration>(
      std::chrono::milliseconds(std::min(ms, maxMs()))));
}

inline std::int64_t nowMs() {
  return std::chrono::floor<std::chrono::milliseconds>(
             std::chrono::system_clock::now())
      .time_since_epoch()
      .count();
}

// now + ttl, saturated so a huge TTL cannot overflow (it means "far future").
inline std::int64_t expiryMs(std::int64_t now, std::chrono::milliseconds ttl) {
  const std::int64_t max = maxMs();
  return ttl.count() >= max - now ? max : now + ttl.count();
}

}  // namespace dlm::internal::sqlite
