// The readers workload: a reader-heavy mix of SHARED and EXCLUSIVE locks on a
// few keys against the same work with every lock EXCLUSIVE, through the
// public API only.
#include <fmt/format.h>

#include <memory>
#include <random>
#include <thread>

#include "workloads.h"

namespace dlm_bench {

dlm::LockConfiguration readersConfiguration(const Flags& flags) {
  dlm::LockConfiguration c;
  c.lockTtl = std::chrono::milliseconds(flags.ttlMs);
  c.waitForLock = std::chrono::seconds(10);
  // Waiters are woken by releases; polling is the fallback.
  c.sleepBetweenRetries = std::chrono::milliseconds(5);
  return c;
}

namespace {

// Tags of timedRun: what each operation did.
constexpr int kSharedHold = 0;
constexpr int kExclusiveHold = 1;
constexpr int kTimedOut = 2;

// One thread's loop; `sharedPercent` of its acquisitions SHARED.
Operation readerLoop(dlm::DistributedLockManager* m, const Flags& f,
                     int sharedPercent, std::uint64_t seed) {
  struct State {
    std::mt19937_64 rng;
    std::vector<dlm::Lock> exclusive, shared;
  };
  auto state = std::make_shared<State>();
  state->rng.seed(seed);
  for (int k = 0; k < f.readersKeys; ++k) {
    const std::string id = fmt::format("readers.k{}", k);
    state->exclusive.push_back(m->getLockInstance(id, dlm::LockLevel::DC));
    if (sharedPercent > 0) {
      state->shared.push_back(
          m->getLockInstance(id, dlm::LockLevel::DC, dlm::LockMode::SHARED));
    }
  }
  const auto hold = std::chrono::microseconds(f.readersHoldUs);
  const auto ttl = std::chrono::milliseconds(f.ttlMs);
  const auto keys = static_cast<std::uint64_t>(f.readersKeys);
  return [m, state, sharedPercent, hold, ttl, keys]() {
    const auto k = static_cast<std::size_t>(state->rng() % keys);
    const bool shared = static_cast<int>(state->rng() % 100) < sharedPercent;
    dlm::Lock& lock = shared ? state->shared[k] : state->exclusive[k];
    try {
      m->acquireLock(lock, ttl);
    } catch (const dlm::DLMException& e) {
      if (e.code() != dlm::ErrorCode::LOCK_UNAVAILABLE) throw;
      return kTimedOut;
    }
    if (hold.count() > 0) std::this_thread::sleep_for(hold);
    if (!m->releaseLock(lock)) throw std::runtime_error("release false");
    return shared ? kSharedHold : kExclusiveHold;
  };
}

double acquisitionsPerSec(const RunStats& s) {
  return s.seconds > 0
             ? (s.byTag[kSharedHold] + s.byTag[kExclusiveHold]) / s.seconds
             : 0;
}

}  // namespace

void runReaders(const std::vector<dlm::DistributedLockManager*>& managers,
                const std::string& store, const std::string& config,
                const Flags& f, Report& report) {
  const int threads = f.readersThreads;
  const int percents[2] = {f.sharedPercent, 0};
  const std::vector<RunStats> runs = interleaved(
      2, f.rounds, f.seconds, f.warmup,
      [&](int variant, double seconds, double warmup) {
        return timedRun(threads, seconds, warmup, [&](int t) {
          return readerLoop(
              managers[static_cast<std::size_t>(t) % managers.size()], f,
              percents[variant], 0x5EED0000ull + static_cast<std::uint64_t>(t));
        });
      });
  const RunStats &mixed = runs[0], &exclusive = runs[1];
  const std::string cpuKey =
      store == "sqlite" ? "cpu_us_per_op" : "client_cpu_us_per_op";
  auto describe = [&](const RunStats& s) {
    return fmt::format(
        "{} threads, {} keys, hold {} us, sleepBetweenRetries {} ms: {:.0f} "
        "shared + {:.0f} exclusive acquisitions/s, {} timeouts (latency: "
        "acquireLock + hold + releaseLock)",
        threads, f.readersKeys, f.readersHoldUs,
        readersConfiguration(f).sleepBetweenRetries.count(),
        s.byTag[kSharedHold] / s.seconds, s.byTag[kExclusiveHold] / s.seconds,
        s.byTag[kTimedOut]);
  };
  const double ratio =
      acquisitionsPerSec(mixed) / acquisitionsPerSec(exclusive);
  Result r = resultOf("readers", store,
                      fmt::format("{}% shared {}", f.sharedPercent, config),
                      mixed, cpuKey);
  r.opsPerSec = acquisitionsPerSec(mixed);
  r.ratio = fmt::format("{:.2f}x all-exclusive (acquisitions/s)", ratio);
  r.extra = describe(mixed);
  r.numbers["ratio_exclusive"] = ratio;
  r.numbers["shared_percent"] = f.sharedPercent;
  report.add(r);
  Result b = resultOf("readers.base_exclusive", store,
                      fmt::format("0% shared {}", config), exclusive, cpuKey);
  b.opsPerSec = acquisitionsPerSec(exclusive);
  b.extra = describe(exclusive);
  report.add(b);
}

}  // namespace dlm_bench
