#include "wait_reporter.h"

#include <fmt/format.h>

#include <cstdio>

#include "output_text.h"

namespace dlm::cli {
namespace {

std::string lockText(const LockEvent& e) { return keyText(e.key, e.mode); }

StoreTime storeTime(std::chrono::system_clock::time_point t) {
  return std::chrono::time_point_cast<StoreTime::duration>(t);
}

}  // namespace

std::string waitingBlockerText(const LockEvent& e) {
  if (!e.blocker) return "held elsewhere (its holder just left)";
  const LockBlocker& b = *e.blocker;
  if (b.queued) {
    return fmt::format(
        "not held in its way, but an earlier waiter for {} goes first (fair "
        "queueing)",
        keyText(b.key));
  }
  if (b.owner.empty()) return "held elsewhere (its holder just left)";
  std::string text = b.key == e.key
                         ? std::string("held")
                         : fmt::format("blocked by {}, held", keyText(b.key));
  text += fmt::format(" {} by owner {} (host {}, pid {})", lockModeName(b.mode),
                      b.owner, printable(b.host), b.pid);
  if (b.since) text += fmt::format(" since {}", formatUtc(storeTime(*b.since)));
  return text;
}

void WaitReporter::onEvent(const LockEvent& e) {
  switch (e.kind) {
    case LockEventKind::WAITING: {
      const bool first = !reported_.exchange(true);
      fmt::print(stderr, "dlmctl: {} {}{}: {}\n",
                 first ? "waiting for lock" : "still waiting for", lockText(e),
                 first ? std::string()
                       : fmt::format(" after {}", formatDuration(e.waited)),
                 waitingBlockerText(e));
      break;
    }
    case LockEventKind::STORE_ERROR:
    case LockEventKind::STORE_RECONNECTED:
      fmt::print(stderr, "dlmctl: {}: {}\n",
                 e.kind == LockEventKind::STORE_ERROR ? "store error"
                                                      : "store reconnected",
                 printable(e.message));
      break;
    default:
      break;
  }
}

}  // namespace dlm::cli
