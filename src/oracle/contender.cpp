#include "contender.h"

#include <fmt/format.h>

#include <cstdio>
#include <istream>
#include <ostream>
#include <random>
#include <thread>

#include "dlm/error.h"

namespace dlm::oracle {
namespace {

std::chrono::microseconds uniform(std::mt19937_64& rng,
                                  std::chrono::microseconds lo,
                                  std::chrono::microseconds hi) {
  if (hi <= lo) return lo;
  std::uniform_int_distribution<std::int64_t> dist(lo.count(), hi.count());
  return std::chrono::microseconds(dist(rng));
}

// A system_clock time as ms since the epoch, rounded down.
std::int64_t wallMs(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch())
      .count();
}

bool isTransient(ErrorCode code) {
  return code == ErrorCode::CONNECTION_ERROR ||
         code == ErrorCode::RETRIES_EXHAUSTED;
}

}  // namespace

void writeResult(const ContendResult& result, std::ostream& out) {
  out << fmt::format("S\t{}\t{}\t{}\t{}\t{}\n", result.attempts,
                     result.acquisitions, result.unavailable,
                     result.failedReleases, result.transientErrors);
  if (!result.error.empty()) {
    std::string oneLine = result.error;
    for (char& c : oneLine) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    out << "E\t" << oneLine << '\n';
  }
  for (const Hold& h : result.holds) out << "H\t" << formatHold(h) << '\n';
  // The end marker tells a complete result from one cut short.
  out << "END\n";
}

std::optional<ContendResult> readResult(std::istream& in,
                                        std::string* problem) {
  ContendResult result;
  bool sawCounters = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line == "END") {
      if (!sawCounters) break;
      return result;
    }
    if (line.rfind("H\t", 0) == 0) {
      auto hold = parseHold(line.substr(2));
      if (!hold) {
        *problem = "malformed hold line: " + line;
        return std::nullopt;
      }
      result.holds.push_back(std::move(*hold));
    } else if (line.rfind("E\t", 0) == 0) {
      result.error = line.substr(2);
    } else if (line.rfind("S\t", 0) == 0) {
      long long attempts = 0, acquisitions = 0, unavailable = 0, failed = 0,
                transient = 0;
      if (std::sscanf(line.c_str(), "S\t%lld\t%lld\t%lld\t%lld\t%lld",
                      &attempts, &acquisitions, &unavailable, &failed,
                      &transient) != 5) {
        *problem = "malformed counter line: " + line;
        return std::nullopt;
      }
      result.attempts = attempts;
      result.acquisitions = acquisitions;
      result.unavailable = unavailable;
      result.failedReleases = failed;
      result.transientErrors = transient;
      sawCounters = true;
    } else {
      *problem = "unexpected line: " + line;
      return std::nullopt;
    }
  }
  *problem = "the result is incomplete (no END line)";
  return std::nullopt;
}

ContendResult contend(DistributedLockManager& manager,
                      const ContendOptions& options) {
  ContendResult result;
  if (options.keys.empty()) {
    result.error = "no keys to contend for";
    return result;
  }
  std::mt19937_64 rng(options.seed);
  std::vector<int> weights;
  for (const auto& k : options.keys) weights.push_back(k.weight);
  std::discrete_distribution<std::size_t> pickKey(weights.begin(),
                                                  weights.end());
  std::uniform_int_distribution<int> percent(0, 99);

  // One Lock per key and mode in use, reused: a Lock is a handle, not an
  // acquisition.
  std::vector<Lock> exclusive, shared;
  try {
    for (const auto& k : options.keys) {
      if (options.sharedPercent < 100) {
        exclusive.push_back(manager.getLockInstance(k.id, options.level));
      }
      if (options.sharedPercent > 0) {
        shared.push_back(
            manager.getLockInstance(k.id, options.level, LockMode::SHARED));
      }
    }
  } catch (const DLMException& e) {
    // A bad key is the caller's mistake; report it like any other failure.
    result.error = fmt::format("{}: {}", toString(e.code()), e.what());
    return result;
  }

  while (options.maxAttempts == 0 || result.attempts < options.maxAttempts) {
    if (std::chrono::steady_clock::now() >= options.deadline) break;
    if (options.stopRequested && options.stopRequested()) break;
    const std::size_t index = pickKey(rng);
    // Drawn every attempt, whatever the mix, so a seed gives the same keys.
    const bool readMode = percent(rng) < options.sharedPercent;
    Lock& lock = readMode ? shared[index] : exclusive[index];
    const bool useTry = percent(rng) < options.tryPercent;
    ++result.attempts;
    try {
      if (useTry) {
        manager.tryAcquireLock(lock, options.ttl);
      } else {
        manager.acquireLock(lock, options.ttl, options.timeout);
      }
    } catch (const DLMException& e) {
      if (e.code() == ErrorCode::LOCK_UNAVAILABLE) {
        // Someone else holds it: the normal outcome under contention.
        ++result.unavailable;
        std::this_thread::sleep_for(
            uniform(rng, std::chrono::microseconds(0), options.pauseMax));
        continue;
      }
      if (isTransient(e.code()) &&
          result.transientErrors < options.transientErrorsAllowed) {
        // A slow or restarting server: the attempt failed, the run goes on.
        // (An acquisition whose reply was lost is resolved by the library.)
        ++result.transientErrors;
        continue;
      }
      result.error = fmt::format("acquiring '{}': {}: {}", lock.id(),
                                 toString(e.code()), e.what());
      break;
    }

    Hold hold;
    hold.startNs = steadyNowNs();
    hold.key = lock.id();
    hold.worker = options.worker;
    hold.fencing = lock.fencingToken();
    hold.shared = readMode;
    hold.acquiredAtMs = wallMs(lock.acquiredAt());
    ++result.acquisitions;
    std::this_thread::sleep_for(uniform(rng, options.holdMin, options.holdMax));
    hold.endNs = steadyNowNs();
    hold.releaseCalledMs = wallMs(std::chrono::system_clock::now());
    try {
      for (;;) {
        try {
          hold.released = manager.releaseLock(lock);
          break;
        } catch (const DLMException& e) {
          // Still held (the API's promise for a failed release): again.
          if (!isTransient(e.code()) ||
              result.transientErrors >= options.transientErrorsAllowed) {
            throw;
          }
          ++result.transientErrors;
        }
      }
    } catch (const DLMException& e) {
      // The lock stays held until its TTL; record the hold (it happened) and
      // stop, since the store is failing.
      hold.released = false;
      result.holds.push_back(hold);
      result.error = fmt::format("releasing '{}': {}: {}", lock.id(),
                                 toString(e.code()), e.what());
      break;
    }
    if (!hold.released) ++result.failedReleases;
    result.holds.push_back(std::move(hold));
    if (options.targetHolds > 0 &&
        static_cast<std::int64_t>(result.holds.size()) == options.targetHolds &&
        options.onTarget) {
      options.onTarget();
    }
    std::this_thread::sleep_for(
        uniform(rng, std::chrono::microseconds(0), options.pauseMax));
  }
  return result;
}

}  // namespace dlm::oracle
