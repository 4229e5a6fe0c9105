#include "hold_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>

namespace dlm::oracle {

std::int64_t steadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

std::string escapeKey(const std::string& key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::optional<std::string> unescapeKey(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\') {
      out += text[i];
      continue;
    }
    if (++i == text.size()) return std::nullopt;
    switch (text[i]) {
      case '\\':
        out += '\\';
        break;
      case 't':
        out += '\t';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      default:
        return std::nullopt;
    }
  }
  return out;
}

std::string brief(const Hold& h) {
  return fmt::format("{}{} by worker {} [{} .. {}] ns fencing {}", h.key,
                     h.shared ? " (shared)" : "", h.worker, h.startNs, h.endNs,
                     h.fencing);
}

// Holds in start order. For each hold, the latest release call among the
// conflicting holds that ended before it started (swept in end order, kept
// per key and mode: the keys of a run are few) must not come after its
// acquiredAt: the store granted it after that release.
void checkAcquisitionTimes(const std::vector<Hold>& holds, char separator,
                           std::size_t maxListed, HoldReport& report) {
  struct Latest {
    const Hold* any = nullptr;        // of either mode
    const Hold* exclusive = nullptr;  // exclusive only
  };
  std::map<std::string, Latest> ended;
  std::map<std::string, std::vector<std::string>> conflicting;
  for (const Hold& h : holds) conflicting.try_emplace(h.key);
  for (auto& [key, others] : conflicting) {
    for (const auto& entry : conflicting) {
      if (keysConflict(key, entry.first, separator)) {
        others.push_back(entry.first);
      }
    }
  }
  const auto later = [](const Hold* best, const Hold* e) {
    if (e == nullptr) return best;
    if (best == nullptr) return e;
    return e->releaseCalledMs > best->releaseCalledMs ? e : best;
  };
  std::vector<const Hold*> byEnd;
  for (const Hold& h : holds) byEnd.push_back(&h);
  std::sort(byEnd.begin(), byEnd.end(),
            [](const Hold* x, const Hold* y) { return x->endNs < y->endNs; });
  std::size_t endedUpTo = 0;
  for (const Hold& h : holds) {
    while (endedUpTo < byEnd.size() && byEnd[endedUpTo]->endNs < h.startNs) {
      const Hold* e = byEnd[endedUpTo++];
      if (e->releaseCalledMs == 0) continue;
      Latest& latest = ended[e->key];
      latest.any = later(latest.any, e);
      if (!e->shared) latest.exclusive = later(latest.exclusive, e);
    }
    if (h.acquiredAtMs == 0) continue;
    const Hold* before = nullptr;
    for (const std::string& key : conflicting[h.key]) {
      const Latest& latest = ended[key];
      before = later(before, h.shared ? latest.exclusive : latest.any);
    }
    if (before == nullptr || before->releaseCalledMs <= h.acquiredAtMs) {
      continue;
    }
    ++report.earlyAcquisitionCount;
    if (report.earlyAcquisitions.size() < maxListed) {
      report.earlyAcquisitions.emplace_back(*before, h);
    }
  }
}

}  // namespace

std::string formatHold(const Hold& hold) {
  // The key goes last so that it may contain spaces.
  return fmt::format(
      "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}", hold.worker, hold.startNs,
      hold.endNs, hold.fencing, hold.released ? 1 : 0, hold.shared ? 'S' : 'X',
      hold.acquiredAtMs, hold.releaseCalledMs, escapeKey(hold.key));
}

std::optional<Hold> parseHold(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t pos = 0;
  for (int i = 0; i < 8; ++i) {
    const std::size_t tab = line.find('\t', pos);
    if (tab == std::string::npos) return std::nullopt;
    fields.push_back(line.substr(pos, tab - pos));
    pos = tab + 1;
  }
  Hold hold;
  try {
    std::size_t used = 0;
    hold.worker = std::stoi(fields[0], &used);
    if (used != fields[0].size()) return std::nullopt;
    hold.startNs = std::stoll(fields[1], &used);
    if (used != fields[1].size()) return std::nullopt;
    hold.endNs = std::stoll(fields[2], &used);
    if (used != fields[2].size()) return std::nullopt;
    hold.fencing = std::stoll(fields[3], &used);
    if (used != fields[3].size()) return std::nullopt;
    hold.acquiredAtMs = std::stoll(fields[6], &used);
    if (used != fields[6].size()) return std::nullopt;
    hold.releaseCalledMs = std::stoll(fields[7], &used);
    if (used != fields[7].size()) return std::nullopt;
  } catch (const std::exception&) {
    // stoi/stoll throw on non-numbers and overflow: a malformed line.
    return std::nullopt;
  }
  if (fields[4] != "0" && fields[4] != "1") return std::nullopt;
  hold.released = fields[4] == "1";
  if (fields[5] != "S" && fields[5] != "X") return std::nullopt;
  hold.shared = fields[5] == "S";
  auto key = unescapeKey(line.substr(pos));
  if (!key || key->empty()) return std::nullopt;
  hold.key = std::move(*key);
  return hold;
}

bool keysConflict(const std::string& a, const std::string& b, char separator) {
  if (a == b) return true;
  const std::string& shorter = a.size() < b.size() ? a : b;
  const std::string& longer = a.size() < b.size() ? b : a;
  return longer.size() > shorter.size() &&
         longer.compare(0, shorter.size(), shorter) == 0 &&
         longer[shorter.size()] == separator;
}

bool holdsConflict(const Hold& a, const Hold& b, char separator) {
  return !(a.shared && b.shared) && keysConflict(a.key, b.key, separator);
}

HoldReport checkHolds(std::vector<Hold> holds, char separator,
                      std::size_t maxListed) {
  HoldReport report;
  report.holds = static_cast<std::int64_t>(holds.size());
  std::sort(holds.begin(), holds.end(), [](const Hold& x, const Hold& y) {
    return x.startNs != y.startNs ? x.startNs < y.startNs : x.endNs < y.endNs;
  });

  // Sweep in start order, keeping the holds still open at the current start.
  // When exclusion works the open set only holds unrelated keys, so it stays
  // as small as the number of concurrent holders.
  std::vector<const Hold*> open;
  std::map<std::string, std::int64_t> overlapsByKey;
  for (const Hold& h : holds) {
    open.erase(
        std::remove_if(open.begin(), open.end(),
                       [&](const Hold* o) { return o->endNs < h.startNs; }),
        open.end());
    for (const Hold* o : open) {
      if (o->shared && h.shared && keysConflict(o->key, h.key, separator)) {
        ++report.sharedOverlapCount;
        continue;
      }
      if (!holdsConflict(*o, h, separator)) continue;
      ++report.overlapCount;
      ++overlapsByKey[h.key];
      if (o->key != h.key) ++overlapsByKey[o->key];
      if (report.overlaps.size() < maxListed)
        report.overlaps.emplace_back(*o, h);
    }
    open.push_back(&h);
    if (!h.released) report.failedReleases.push_back(h);
  }

  checkAcquisitionTimes(holds, separator, maxListed, report);

  std::map<std::string, std::vector<const Hold*>> byKey;
  for (const Hold& h : holds) byKey[h.key].push_back(&h);  // in start order
  for (const auto& [key, list] : byKey) {
    KeySummary summary;
    summary.key = key;
    summary.holds = static_cast<std::int64_t>(list.size());
    summary.firstFencing = list.front()->fencing;
    summary.lastFencing = list.back()->fencing;
    summary.overlaps = overlapsByKey[key];
    const auto violation = [&](const Hold& earlier, const Hold& later) {
      summary.fencingIncreasing = false;
      if (report.fencingViolations.size() < maxListed) {
        report.fencingViolations.emplace_back(earlier, later);
      }
    };
    // In start order: every hold's token must exceed the largest token of
    // the holds that ended before it started (swept in end order) when one
    // of the two is exclusive. Two shared holds prove no order: their grants
    // may have come in either order whatever their recorded intervals (a
    // reader's acquire call may return long after its grant, by which time a
    // reader granted later may have come and gone).
    std::vector<const Hold*> byEnd(list.begin(), list.end());
    std::sort(byEnd.begin(), byEnd.end(),
              [](const Hold* x, const Hold* y) { return x->endNs < y->endNs; });
    std::size_t endedUpTo = 0;
    const Hold* highestEnded = nullptr;           // of either mode
    const Hold* highestEndedExclusive = nullptr;  // exclusive only
    const auto higher = [](const Hold* best, const Hold* e) {
      return best == nullptr || e->fencing > best->fencing ? e : best;
    };
    std::map<std::int64_t, const Hold*> seen;
    for (const Hold* h : list) {
      while (endedUpTo < byEnd.size() && byEnd[endedUpTo]->endNs < h->startNs) {
        const Hold* e = byEnd[endedUpTo++];
        highestEnded = higher(highestEnded, e);
        if (!e->shared) {
          highestEndedExclusive = higher(highestEndedExclusive, e);
        }
      }
      const Hold* mustExceed = h->shared ? highestEndedExclusive : highestEnded;
      if (mustExceed != nullptr && h->fencing <= mustExceed->fencing) {
        violation(*mustExceed, *h);
      } else if (const auto [it, fresh] = seen.emplace(h->fencing, h); !fresh) {
        violation(*it->second, *h);
      }
      seen.emplace(h->fencing, h);
    }
    report.keys.push_back(summary);
  }
  return report;
}

std::vector<std::string> describeProblems(const HoldReport& report) {
  std::vector<std::string> lines;
  for (const auto& [a, b] : report.overlaps) {
    lines.push_back(fmt::format("overlap: {}  and  {}", brief(a), brief(b)));
  }
  if (report.overlapCount > static_cast<std::int64_t>(report.overlaps.size())) {
    lines.push_back(
        fmt::format("... {} overlapping pairs in all", report.overlapCount));
  }
  for (const auto& [a, b] : report.fencingViolations) {
    lines.push_back(fmt::format("fencing token did not grow: {}  then  {}",
                                brief(a), brief(b)));
  }
  for (const auto& [a, b] : report.earlyAcquisitions) {
    lines.push_back(fmt::format(
        "acquired at {} ms, before the release call at {} ms of: {}  then  {}",
        b.acquiredAtMs, a.releaseCalledMs, brief(a), brief(b)));
  }
  for (const Hold& h : report.failedReleases) {
    lines.push_back(fmt::format("releaseLock returned false: {}", brief(h)));
  }
  return lines;
}

}  // namespace dlm::oracle
