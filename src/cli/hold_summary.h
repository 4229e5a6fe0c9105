// How list and top count holds: the one definition both print, so the two
// views of one moment agree.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dlm/lock_record.h"

namespace dlm::cli {

// A hold is one holder's hold of one key as the listing gives it (a key
// held SHARED by three owners is three holds), live or expired: an expired
// hold is still listed until its holder releases it or someone takes the
// key (lock_store_admin.h), so it is counted, and said to be expired.
struct HoldCount {
  std::size_t holds = 0;
  std::size_t keys = 0;     // distinct keys among them
  std::size_t expired = 0;  // of `holds`, those whose lease ended
};

HoldCount countHolds(const std::vector<LockRecord>& holds);

// "2 holds on 2 keys, 1 of them expired", "1 hold on 1 key", "0 holds".
std::string holdCountText(const HoldCount& count);

}  // namespace dlm::cli
