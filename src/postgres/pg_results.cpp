#include "postgres/pg_results.h"

#include <fmt/format.h>

#include <string_view>

#include "dlm/error.h"
#include "postgres/pg_array.h"

namespace dlm::internal {

StoreTime fromEpochMs(const PgResult& r, int row, int col) {
  if (r.isNull(row, col)) return StoreTime{};
  return StoreTime(std::chrono::milliseconds(r.int64(row, col)));
}

LockRecord toRecord(const PgResult& r, int row, bool withMode) {
  LockRecord rec;
  rec.key = r.text(row, 0);
  rec.statusHeld = r.boolean(row, 1);
  rec.held = r.boolean(row, 2);
  rec.owner = r.text(row, 3);
  rec.fencingToken = r.int64(row, 4);
  rec.acquiredAt = fromEpochMs(r, row, 5);
  rec.expiresAt = fromEpochMs(r, row, 6);
  rec.ttl = std::chrono::milliseconds(r.int64(row, 7));
  rec.holder.host = r.text(row, 8);
  rec.holder.pid = r.int64(row, 9);
  // host(holder_ip): the address without its /32 (/128) mask; NULL (a unix
  // socket) reads as "".
  rec.holderIp = r.text(row, 10);
  if (withMode && r.boolean(row, 11)) rec.mode = LockMode::SHARED;
  // NULL (not an admin, or made before schema 17) reads as "".
  rec.login = r.text(row, withMode ? 12 : 11);
  return rec;
}

WaitRecord toWaitRecord(const PgResult& r, int row) {
  WaitRecord rec;
  rec.key = r.text(row, 0);
  rec.owner = r.text(row, 1);
  rec.requestedAt = fromEpochMs(r, row, 2);
  rec.expiresAt = fromEpochMs(r, row, 3);
  if (r.boolean(row, 4)) rec.mode = LockMode::SHARED;
  rec.login = r.text(row, 5);
  // NULL: no deadline recorded (none, or an older library's request).
  if (!r.isNull(row, 6)) rec.deadline = fromEpochMs(r, row, 6);
  return rec;
}


const PgResult& single(const PgResult& r, const char* what) {
  if (r.rows() != 1 || r.columns() != 1) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       fmt::format("{} returned {} rows", what, r.rows()));
  }
  return r;
}

const PgResult& rowPerKey(const PgResult& r, std::size_t keys,
                          const char* what) {
  if (r.rows() < 0 || static_cast<std::size_t>(r.rows()) != keys) {
    throw DLMException(ErrorCode::INTERNAL_ERROR,
                       fmt::format("{} returned {} rows for {} keys", what,
                                   r.rows(), keys));
  }
  return r;
}


Hierarchy::Hierarchy(const StoreKey& key)
    : descBegin(boundOrNull(key.descendantsBegin)),
      descEnd(boundOrNull(key.descendantsEnd)) {
  std::vector<std::string_view> items(key.ancestors.begin(),
                                      key.ancestors.end());
  ancestors = textArrayLiteral(items);
}

}  // namespace dlm::internal
