// dlmctl top: a live view of held locks and waiting requests, each request
// with what keeps it waiting (a conflicting hold on its path, or an older
// conflicting request that fair queueing serves first).
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "commands.h"
#include "hold_summary.h"
#include "lock_json.h"
#include "output_text.h"
#include "signal_fd.h"
#include "table.h"
#include "terminal.h"
#include "dlm/deadline.h"
#include "dlm/error.h"
#include "dlm/lock_configuration.h"
#include "dlm/store_url.h"

namespace dlm::cli {
namespace {

using Clock = std::chrono::steady_clock;

// What keeps a request waiting.
struct Blocker {
  // A live hold on the request's path that conflicts with it, else
  std::optional<LockRecord> hold;
  // the oldest conflicting request of another owner made before it.
  std::optional<WaitRecord> queued;
  // How the key of `hold` or `queued` stands to the request's.
  KeyRelation relation = KeyRelation::UNRELATED;
};

struct Waiter {
  WaitRecord request;
  Blocker blocker;
};

// One reading of the store: the holds and requests under the prefix.
struct Frame {
  std::vector<LockRecord> held;
  std::vector<Waiter> waiters;
  StoreTime now;
};

Blocker blockerOf(const WaitRecord& w, const std::vector<LockRecord>& held,
                  const std::vector<WaitRecord>& requests) {
  const StoreKey key = parseStoreKey(w.key);
  Blocker b;
  b.hold = firstBlocker(held, key, w.mode);
  if (b.hold) {
    b.relation = relationOf(key, b.hold->key);
    return b;
  }
  // The oldest conflicting request goes first; it is ahead of w only when
  // it is older.
  b.queued = oldestQueuedAhead(requests, key, w.mode, w.owner);
  if (b.queued && !(b.queued->requestedAt < w.requestedAt)) b.queued.reset();
  if (b.queued) b.relation = relationOf(key, b.queued->key);
  return b;
}

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

Frame readFrame(LockStore& store, const std::string& prefix) {
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  // Every key, not only the prefix's: what blocks a request may lie outside
  // the prefix (an ancestor).
  const std::vector<LockRecord> held = adminOf(store).listHeld("");
  const std::vector<WaitRecord> requests = adminOf(store).listWaiters("");
  Frame f;
  f.now = store.now();
  for (const LockRecord& r : held) {
    if (startsWith(r.key, prefix)) f.held.push_back(r);
  }
  for (const WaitRecord& w : requests) {
    if (startsWith(w.key, prefix)) {
      f.waiters.push_back({w, blockerOf(w, held, requests)});
    }
  }
  return f;
}

const char* relationName(KeyRelation relation) {
  switch (relation) {
    case KeyRelation::SAME:
      return "same_key";
    case KeyRelation::ANCESTOR:
      return "ancestor";
    case KeyRelation::DESCENDANT:
      return "descendant";
    case KeyRelation::UNRELATED:
      break;
  }
  return "unrelated";
}

// "this key", "ancestor ID" or "descendant ID" (the same scope as the
// waiter's key: the hierarchy lies within one client, level and farm).
std::string whereText(KeyRelation relation, const std::string& key) {
  if (relation == KeyRelation::SAME) return "this key";
  return fmt::format("{} {}", relationName(relation), keyText(key));
}

std::string blockerText(const Blocker& b, StoreTime now) {
  if (b.hold) {
    const LockRecord& r = *b.hold;
    return fmt::format("{} held {} by host {} pid {}",
                       whereText(b.relation, r.key), lockModeName(r.mode),
                       printable(r.holder.host), r.holder.pid);
  }
  if (b.queued) {
    const WaitRecord& q = *b.queued;
    return fmt::format("queued behind {} ({} on {}, waiting {})",
                       printable(q.owner), lockModeName(q.mode),
                       whereText(b.relation, q.key),
                       formatElapsed(q.requestedAt, now));
  }
  // Nothing in its way at this reading: its next attempt takes the lock.
  return "nothing: next in line";
}

std::string frameText(const Frame& f, const std::string& database,
                      const std::string& prefix) {
  // Counted as list counts them (hold_summary.h): every row below.
  std::string out = fmt::format(
      "dlmctl top  {}  {}  {}; {} waiting{}\n\n", database, formatUtc(f.now),
      holdCountText(countHolds(f.held)), f.waiters.size(),
      prefix.empty() ? "" : fmt::format("  (prefix '{}')", printable(prefix)));
  if (f.held.empty()) {
    out += "no held locks\n";
  } else {
    const bool logins = anyLogin(f.held);
    Table table(
        keyHeader(withLogin({"MODE", "OWNER", "HOST*", "PID*", "FENCING",
                             "HELD SINCE (UTC)", "FOR", "EXPIRES IN"},
                            logins, "LOGIN")));
    for (const LockRecord& r : f.held) {
      table.add(keyRow(
          r.key,
          withLogin(
              {lockModeName(r.mode), printable(r.owner),
               printable(r.holder.host), std::to_string(r.holder.pid),
               std::to_string(r.fencingToken), formatUtc(r.acquiredAt),
               formatElapsed(r.acquiredAt, f.now), formatRemaining(r, f.now)},
              logins, loginText(r.login))));
    }
    out += table.render();
  }
  out += '\n';
  if (f.waiters.empty()) {
    out += "no waiting requests\n";
  } else {
    bool logins = false;
    for (const Waiter& w : f.waiters)
      logins = logins || !w.request.login.empty();
    Table table(keyHeader(
        withLogin({"MODE", "OWNER", "WAITING SINCE (UTC)", "FOR", "BLOCKED BY"},
                  logins, "LOGIN")));
    for (const Waiter& w : f.waiters) {
      const WaitRecord& q = w.request;
      table.add(
          keyRow(q.key, withLogin({lockModeName(q.mode), printable(q.owner),
                                   formatUtc(q.requestedAt),
                                   formatElapsed(q.requestedAt, f.now),
                                   blockerText(w.blocker, f.now)},
                                  logins, loginText(q.login))));
    }
    out += table.render();
  }
  return out;
}

// {"kind": "hold", "relation", ...holdJson}, {"kind": "queued",
// "relation", ...waiterJson} or {"kind": "none"}.
nlohmann::json blockerJson(const Blocker& b, StoreTime now) {
  nlohmann::json out = b.hold     ? holdJson(*b.hold, now)
                       : b.queued ? waiterJson(*b.queued, now)
                                  : nlohmann::json::object();
  out["kind"] = b.hold ? "hold" : b.queued ? "queued" : "none";
  if (b.hold || b.queued) out["relation"] = relationName(b.relation);
  return out;
}

nlohmann::json frameJson(const Frame& f, const std::string& database,
                         const std::string& prefix) {
  nlohmann::json held = nlohmann::json::array();
  for (const LockRecord& r : f.held) {
    nlohmann::json hold = holdJson(r, f.now);
    hold["held_ms"] = millisBetween(r.acquiredAt, f.now);
    held.push_back(std::move(hold));
  }
  nlohmann::json waiters = nlohmann::json::array();
  for (const Waiter& w : f.waiters) {
    nlohmann::json waiter = waiterJson(w.request, f.now);
    waiter["blocked_by"] = blockerJson(w.blocker, f.now);
    waiters.push_back(std::move(waiter));
  }
  return {{"database", database},
          {"now", formatIso8601(f.now)},
          {"prefix", prefix},
          {"held", std::move(held)},
          {"waiters", std::move(waiters)}};
}

std::shared_ptr<LockStore> openTopStore(const GlobalOptions& global) {
  const DeadlineScope deadline(
      deadlineAfter(LockConfiguration{}.operationTimeout));
  return openExistingStore(global);
}

// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) is pending.
bool stopRequested(SignalFd& signals) {
  bool stop = false;
  for (int sig = signals.take(); sig != 0; sig = signals.take()) {
    stop = stop || sig != SIGCHLD;
  }
  return stop;
}

// Waits until `until`: false early when q was pressed or a stop signal
// came.
bool waitForNextFrame(Clock::time_point until, SignalFd& signals,
                      Terminal* terminal, bool& watchKeys) {
  for (;;) {
    if (stopRequested(signals)) return false;
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return true;
    pollfd fds[2] = {{signals.fd(), POLLIN, 0},
                     {watchKeys ? terminal->keysFd() : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if ((fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) {
      watchKeys = false;  // stdin is gone: signals still stop the view
    } else if ((fds[1].revents & POLLIN) != 0 && terminal->quitPressed()) {
      return false;
    }
  }
}

int runLive(const GlobalOptions& global, const TopOptions& options,
            const std::string& database) {
  // Before the store: any thread it starts inherits the blocked signals.
  SignalFd signals;
  const std::shared_ptr<LockStore> store = openTopStore(global);
  std::optional<Terminal> terminal;
  if (::isatty(STDOUT_FILENO) == 1) terminal.emplace();
  bool watchKeys = terminal && terminal->keysFd() >= 0;
  for (bool first = true;; first = false) {
    const Clock::time_point next = Clock::now() + options.interval;
    std::string text;
    try {
      text = frameText(readFrame(*store, options.prefix), database,
                       options.prefix);
    } catch (const DLMException& e) {
      // A live view outlasts a store that is down for a while.
      text = fmt::format(
          "dlmctl top  {}\n\nstore error: {} [{}]; trying "
          "again every {}\n",
          database, e.what(), toString(e.code()),
          formatDuration(options.interval));
    }
    if (terminal) {
      terminal->draw(text);
    } else {
      fmt::print("{}{}", first ? "" : "\n", text);
      std::fflush(stdout);
    }
    if (!waitForNextFrame(next, signals, terminal ? &*terminal : nullptr,
                          watchKeys)) {
      return 0;
    }
  }
}

}  // namespace

int runTop(const GlobalOptions& global, const TopOptions& options) {
  const std::string database = describeStoreUrl(global.db);
  if (!options.once) return runLive(global, options, database);
  const std::shared_ptr<LockStore> store = openTopStore(global);
  const Frame frame = readFrame(*store, options.prefix);
  store->close();
  if (options.json) {
    fmt::print("{}", renderJson(frameJson(frame, database, options.prefix)));
  } else {
    fmt::print("{}", frameText(frame, database, options.prefix));
  }
  return 0;
}

}  // namespace dlm::cli
