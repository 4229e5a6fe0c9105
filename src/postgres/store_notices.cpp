#include "postgres/store_notices.h"

#include <iterator>
#include <utility>

namespace dlm::internal {

std::string warningText(const PgNotice& notice) {
  if (notice.hint.empty()) return notice.message;
  return notice.message + "; " + notice.hint;
}

void CallNotices::take(PgConn& conn) noexcept {
  std::vector<PgNotice> kept = conn.takeNotices();
  if (kept.empty()) return;
  if (notices_.empty()) {
    notices_ = std::move(kept);
    return;
  }
  try {
    // A second attempt on a new connection (the first found dead).
    notices_.insert(notices_.end(), std::make_move_iterator(kept.begin()),
                    std::make_move_iterator(kept.end()));
  } catch (...) {
    // Out of memory: these notices are lost, the call is not.
  }
}

CallNotices::~CallNotices() {
  for (const PgNotice& notice : notices_) {
    try {
      listeners_.warn(warningText(notice));
    } catch (...) {
      // Out of memory: a warning is lost; the call's outcome stands.
    }
  }
}

}  // namespace dlm::internal
