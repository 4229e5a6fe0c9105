// dlm_previous_release_worker: a fleet member still running the previous dlm
// release (schema version 2, commit 7dcc93e), as far as the database can
// tell. It sends that release's exact statements over plain libpq, prepared
// by name on sessions set up as that release set them up, in autocommit:
// dlm_acquire / dlm_release for every attempt, dlm_register_wait /
// dlm_unregister_wait around waiting attempts, dlm_extend on some holds,
// LISTEN dlm_release on a connection of its own. It runs the contention
// scenario's keys (tests/contention/scenario.h) in the scenario's scope, so
// it fights over the same rows as dlm_contention_worker processes of the new
// library, and logs its holds in their format (oracle::writeResult) for the same
// checker.
//
// Transient failures (lock_timeout, serialization failure, deadlock: what a
// migration's brief locks cause) are retried and counted; every other SQL
// error is counted as an error, reported, and the loop goes on.
//
//   dlm_previous_release_worker --conninfo CONNINFO --schema S --worker N
//       --threads T --start-at-ns NS --max-seconds S --out FILE --stats FILE
//       [--long-key ID [--long-holder]]
//
// With --long-key, one attempt in 50 is a try on that lock id (outside the
// scenario's keys); with --long-holder one more thread holds it for the
// whole run, extending it every 500 ms, so that a lock is held across the
// migration and every probe must be refused.
//
// Runs from start-at-ns until SIGTERM (or max-seconds, a safety bound), then
// writes FILE (holds) and the stats FILE and exits 0 when there was no error.
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "contender.h"
#include "hold_log.h"
#include "contention/scenario.h"
#include "common/crc32.h"
#include "dlm/lock_key.h"
#include "postgres/pg_array.h"
#include "upgrade/previous_release_log.h"

namespace {

using dlm::oracle::ContendResult;
using dlm::test::upgrade::AcquireCall;
using dlm::test::upgrade::PreviousReleaseStats;
using namespace std::chrono_literals;

// --- the previous release's SQL --------------------------------------------

// Verbatim from `git show 7dcc93e:src/postgres/pg_statements.cpp`, under the
// names that release prepared them with. A migration must keep every one of
// them working.
struct Statement {
  const char* name;
  const char* sql;
};
constexpr Statement kAcquire{
    "dlm_acquire",
    "SELECT acquired, fencing_token, acquired_at_ms, expires_at_ms, "
    "blocked_by FROM dlm_acquire($1::text[], $2::bigint[], $3, $4, $5, $6, "
    "$7, $8, $9)"};
constexpr Statement kRelease{"dlm_release",
                             "SELECT dlm_release($1, $2, $3::text[], $4, $5)"};
constexpr Statement kRegisterWait{
    "dlm_register_wait",
    "SELECT u.k FROM unnest(dlm_register_wait($1, $2::text[], $3, $4, $5, "
    "$6)) WITH ORDINALITY AS u (k, i) ORDER BY u.i"};
constexpr Statement kUnregisterWait{"dlm_unregister_wait",
                                    "SELECT dlm_unregister_wait($1, $2)"};
constexpr Statement kExtend{"dlm_extend", "SELECT dlm_extend($1, $2, $3)"};
// initialize(): that release refuses any schema version but its own.
constexpr Statement kVersion{"dlm_version",
                             "SELECT max(version) FROM dlm_schema_version"};
constexpr Statement kStatements[] = {kAcquire,        kRelease, kRegisterWait,
                                     kUnregisterWait, kExtend,  kVersion};
constexpr int kPreviousSchemaVersion = 2;
// Its release channel (src/postgres/pg_release_channel.cpp).
constexpr const char* kListen = "LISTEN dlm_release";

// Its session settings (PgSessions::openForStore with the default
// PostgresStoreOptions: rowLockWait 50 ms, operationTimeout 5 s).
constexpr int kRowLockWaitMs = 50;
constexpr int kStatementTimeoutMs = 5000;

// --- the workload ------------------------------------------------------------

// Transient failures are retried this far apart for this long per call. A
// migration whose locks keep the previous release out for longer than that
// fails the test: a brief lock is fine, a long one stalls the fleet.
constexpr auto kRetryBackoff = 5ms;
constexpr auto kRetryFor = 3s;
// As in contention::scenarioOptions: a TTL no hold comes near, a wait of
// 500 ms, holds up to 2 ms, pauses up to 1 ms, half the attempts waiting.
constexpr std::int64_t kTtlMs = 60000;
constexpr auto kWaitTimeout = 500ms;
constexpr auto kPollInterval = 2ms;
constexpr std::int64_t kHoldMaxUs = 2000;
constexpr std::int64_t kPauseMaxUs = 1000;
constexpr int kWaitPercent = 50;
// One hold in this many extends its lease once.
constexpr int kExtendOneIn = 4;
// With --long-key: one attempt in this many tries that key instead.
constexpr int kProbeOneIn = 50;
// The --long-holder extends its lease this often.
constexpr auto kLongExtendEvery = 500ms;

std::atomic<bool> gStop{false};

extern "C" void onStopSignal(int) { gStop.store(true); }

bool stopping(std::chrono::steady_clock::time_point deadline) {
  return gStop.load() || std::chrono::steady_clock::now() >= deadline;
}

struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultCloser>;
struct ConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnCloser>;

// lock_not_available (lock_timeout), serialization_failure,
// deadlock_detected: the statement rolled back and may simply be repeated.
bool isTransient(const std::string& sqlstate) {
  return sqlstate == "55P03" || sqlstate == "40001" || sqlstate == "40P01";
}

// Hex of `bytes` bytes from the OS's random source (std::random_device reads
// it on Linux): tokens and owner ids.
std::string randomHex(std::random_device& source, std::size_t bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  while (out.size() < bytes * 2) {
    std::uint32_t v = source();
    for (int i = 0; i < 8 && out.size() < bytes * 2; ++i, v >>= 4) {
      out += kDigits[v & 0xF];
    }
  }
  return out;
}

// One connection set up as the previous release set up its store's
// connections, with its statements prepared. Used by one thread.
class Session {
 public:
  Session(std::string conninfo, std::string schema, PreviousReleaseStats& stats)
      : conninfo_(std::move(conninfo)),
        schema_(std::move(schema)),
        stats_(stats) {}

  // Throws std::runtime_error when the server refuses.
  void open() {
    conn_.reset(PQconnectdb(conninfo_.c_str()));
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      throw std::runtime_error(std::string("connect: ") +
                               PQerrorMessage(conn_.get()));
    }
    char* quoted =
        PQescapeIdentifier(conn_.get(), schema_.c_str(), schema_.size());
    if (quoted == nullptr) {
      throw std::runtime_error(std::string("quoting the schema: ") +
                               PQerrorMessage(conn_.get()));
    }
    const std::string setup =
        std::string("SET search_path = ") + quoted +
        "; SET lock_timeout = " + std::to_string(kRowLockWaitMs) +
        "; SET statement_timeout = " + std::to_string(kStatementTimeoutMs) +
        "; SET plan_cache_mode = force_generic_plan;";
    PQfreemem(quoted);
    expectStatus(Result(PQexec(conn_.get(), setup.c_str())), PGRES_COMMAND_OK,
                 "session setup");
    // Prepared up front, before any migration runs: the cached plans are
    // then the ones a long-running old instance has.
    for (const Statement& s : kStatements) {
      expectStatus(Result(PQprepare(conn_.get(), s.name, s.sql, 0, nullptr)),
                   PGRES_COMMAND_OK, s.name);
    }
  }

  // Runs a prepared statement in autocommit, retrying transient failures.
  // nullopt after recording an error.
  std::optional<Result> call(const Statement& s,
                             const std::vector<const char*>& params) {
    const auto giveUpAt = std::chrono::steady_clock::now() + kRetryFor;
    for (int attempt = 1;; ++attempt) {
      ++stats_.calls[s.name];
      Result r(PQexecPrepared(conn_.get(), s.name,
                              static_cast<int>(params.size()), params.data(),
                              nullptr, nullptr, 0));
      if (r && PQresultStatus(r.get()) == PGRES_TUPLES_OK) return r;
      const char* state =
          r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
      const std::string sqlstate = state ? state : "";
      if (isTransient(sqlstate) &&
          std::chrono::steady_clock::now() < giveUpAt) {
        ++stats_.retries[sqlstate];
        std::this_thread::sleep_for(kRetryBackoff);
        continue;
      }
      stats_.addError(
          std::string(s.name) + " [" +
          (sqlstate.empty() ? "no SQLSTATE" : sqlstate) +
          (attempt > 1 ? ", after " + std::to_string(attempt) + " tries"
                       : std::string()) +
          "]: " +
          (r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_.get())));
      if (PQstatus(conn_.get()) != CONNECTION_OK) reopen();
      return std::nullopt;
    }
  }

 private:
  void expectStatus(const Result& r, ExecStatusType want, const char* what) {
    if (!r || PQresultStatus(r.get()) != want) {
      throw std::runtime_error(
          std::string(what) + ": " +
          (r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_.get())));
    }
  }

  // A lost connection is itself an error (recorded by the caller); open a
  // new one so the loop can go on, as the previous release's pool would.
  void reopen() {
    try {
      open();
    } catch (const std::exception& e) {
      stats_.addError(std::string("reconnect: ") + e.what());
    }
  }

  std::string conninfo_;
  std::string schema_;
  PreviousReleaseStats& stats_;
  Conn conn_;
};

// One key with the parameters the previous release derived from it.
struct KeyParams {
  std::string id;  // lock id, as logged
  int weight = 1;
  dlm::StoreKey storeKey;
  std::string path;       // text[]: ancestors root first, then the key
  std::string crcs;       // bigint[]: crc32 of each element of path
  std::string ancestors;  // text[]: ancestors only
};

const char* nullIfEmpty(const std::string& s) {
  return s.empty() ? nullptr : s.c_str();
}

KeyParams keyParams(const std::string& id, int weight) {
  namespace contention = dlm::test::contention;
  // The scope a DistributedLockManager with the scenario's client and farm
  // builds keys in (hierarchy on, '.' separating segments).
  const dlm::LockKeyScope scope{contention::kFarm, contention::kClient, '.',
                                true};
  KeyParams p;
  p.id = id;
  p.weight = weight;
  p.storeKey = dlm::lockStoreKey(dlm::LockLevel::DC, scope, id);
  std::vector<std::string_view> path(p.storeKey.ancestors.begin(),
                                     p.storeKey.ancestors.end());
  p.ancestors = dlm::internal::textArrayLiteral(path);
  path.emplace_back(p.storeKey.key);
  std::vector<std::int64_t> crcs;
  for (auto element : path) crcs.push_back(dlm::internal::crc32(element));
  p.path = dlm::internal::textArrayLiteral(path);
  p.crcs = dlm::internal::bigintArrayLiteral(crcs);
  return p;
}

bool isTrue(const PGresult* r) {
  return PQntuples(r) == 1 && !PQgetisnull(r, 0, 0) &&
         std::string(PQgetvalue(r, 0, 0)) == "t";
}

// One thread's side of the previous release's store calls: its owner id,
// holder description and random source, on its own session.
class Caller {
 public:
  Caller(Session& session, PreviousReleaseStats& stats)
      : session_(session),
        stats_(stats),
        rng_(entropy_()),
        owner_(randomHex(entropy_, 16)),
        pid_(std::to_string(getpid())) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    host_ = host;
  }

  std::int64_t uniform(std::int64_t maxInclusive) {
    return std::uniform_int_distribution<std::int64_t>(0, maxInclusive)(rng_);
  }
  // A fresh token per acquisition, from the OS's random source.
  std::string newToken() { return randomHex(entropy_, 16); }

  // One dlm_acquire call (transients retried); the fencing token when it
  // acquired.
  std::optional<std::int64_t> acquire(const KeyParams& key,
                                      const std::string& token) {
    const dlm::StoreKey& sk = key.storeKey;
    AcquireCall call;
    call.startNs = dlm::oracle::steadyNowNs();
    auto r = session_.call(
        kAcquire,
        {key.path.c_str(), key.crcs.c_str(), nullIfEmpty(sk.descendantsBegin),
         nullIfEmpty(sk.descendantsEnd), owner_.c_str(), token.c_str(),
         ttl_.c_str(), host_.c_str(), pid_.c_str()});
    call.endNs = dlm::oracle::steadyNowNs();
    std::optional<std::int64_t> fencing;
    if (r && PQntuples(r->get()) != 1) {
      stats_.addError("dlm_acquire returned " +
                      std::to_string(PQntuples(r->get())) + " rows");
    } else if (r && std::string(PQgetvalue(r->get(), 0, 0)) == "t") {
      fencing = std::stoll(PQgetvalue(r->get(), 0, 1));
    }
    call.acquired = fencing.has_value();
    stats_.acquires.push_back(call);
    return fencing;
  }

  // The request row, after the deadlock check.
  void registerWait(const KeyParams& key) {
    const dlm::StoreKey& sk = key.storeKey;
    auto r =
        session_.call(kRegisterWait, {sk.key.c_str(), key.ancestors.c_str(),
                                      nullIfEmpty(sk.descendantsBegin),
                                      nullIfEmpty(sk.descendantsEnd),
                                      owner_.c_str(), maxWait_.c_str()});
    // A cycle: impossible here, a worker holds nothing while it waits.
    if (r && PQntuples(r->get()) > 0) ++stats_.deadlockCycles;
  }

  void unregisterWait(const KeyParams& key) {
    session_.call(kUnregisterWait, {key.storeKey.key.c_str(), owner_.c_str()});
  }

  // Counts a lease found lost (NULL) in stats.
  void extend(const KeyParams& key, const std::string& token) {
    auto r = session_.call(
        kExtend, {key.storeKey.key.c_str(), token.c_str(), ttl_.c_str()});
    if (r && (PQntuples(r->get()) != 1 || PQgetisnull(r->get(), 0, 0))) {
      ++stats_.extendsLost;
    }
  }

  bool release(const KeyParams& key, const std::string& token) {
    const dlm::StoreKey& sk = key.storeKey;
    auto r = session_.call(
        kRelease,
        {sk.key.c_str(), token.c_str(), key.ancestors.c_str(),
         nullIfEmpty(sk.descendantsBegin), nullIfEmpty(sk.descendantsEnd)});
    return r && isTrue(r->get());
  }

 private:
  Session& session_;
  PreviousReleaseStats& stats_;
  std::random_device entropy_;
  std::mt19937_64 rng_;
  std::string owner_;  // the previous release's owner id: one per thread
  std::string host_;
  std::string pid_;
  const std::string ttl_ = std::to_string(kTtlMs);
  const std::string maxWait_ = std::to_string(kWaitTimeout / 1ms);
};

// One contender thread: the previous release's acquire/wait/extend/release
// cycle on the scenario's keys until stopped. With `probe`, one attempt in
// kProbeOneIn is a single try on that key (held by another thread across the
// whole run: a success would be an overlap).
ContendResult contend(Session& session, PreviousReleaseStats& stats, int worker,
                      const KeyParams* probe,
                      std::chrono::steady_clock::time_point startAt,
                      std::chrono::steady_clock::time_point deadline) {
  Caller caller(session, stats);
  std::vector<KeyParams> keys;
  int totalWeight = 0;
  for (const auto& k : dlm::test::contention::scenarioKeys()) {
    keys.push_back(keyParams(k.id, k.weight));
    totalWeight += k.weight;
  }

  ContendResult result;
  std::this_thread::sleep_until(startAt);
  while (!stopping(deadline)) {
    ++result.attempts;
    const KeyParams* key = &keys.front();
    bool waits = caller.uniform(99) < kWaitPercent;
    if (probe != nullptr && caller.uniform(kProbeOneIn - 1) == 0) {
      key = probe;
      waits = false;
      ++stats.probes;
    } else {
      std::int64_t pick = caller.uniform(totalWeight - 1);
      for (const auto& k : keys) {
        if (pick < k.weight) {
          key = &k;
          break;
        }
        pick -= k.weight;
      }
    }
    const std::string token = caller.newToken();

    if (waits) caller.registerWait(*key);
    const auto waitDeadline = std::chrono::steady_clock::now() + kWaitTimeout;
    std::optional<std::int64_t> fencing;
    for (;;) {
      fencing = caller.acquire(*key, token);
      if (fencing || !waits || gStop.load() ||
          std::chrono::steady_clock::now() + kPollInterval > waitDeadline) {
        break;
      }
      std::this_thread::sleep_for(kPollInterval);
    }
    if (waits) caller.unregisterWait(*key);

    if (fencing) {
      ++result.acquisitions;
      dlm::oracle::Hold hold;
      hold.key = key->id;
      hold.worker = worker;
      hold.fencing = *fencing;
      hold.startNs = dlm::oracle::steadyNowNs();
      if (caller.uniform(kExtendOneIn - 1) == 0) caller.extend(*key, token);
      std::this_thread::sleep_for(
          std::chrono::microseconds(caller.uniform(kHoldMaxUs)));
      hold.endNs = dlm::oracle::steadyNowNs();
      hold.released = caller.release(*key, token);
      if (!hold.released) ++result.failedReleases;
      result.holds.push_back(hold);
    } else {
      ++result.unavailable;
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(caller.uniform(kPauseMaxUs)));
  }
  return result;
}

// The lock held across the upgrade: acquired at the start, extended every
// kLongExtendEvery while the run lasts (each extension must find the lease
// still ours), released at the stop (which must answer true).
ContendResult holdAcross(Session& session, PreviousReleaseStats& stats,
                         int worker, const KeyParams& key,
                         std::chrono::steady_clock::time_point startAt,
                         std::chrono::steady_clock::time_point deadline) {
  Caller caller(session, stats);
  ContendResult result;
  std::this_thread::sleep_until(startAt);
  const std::string token = caller.newToken();
  std::optional<std::int64_t> fencing;
  // A probe may hold it for a moment at the very start.
  while (!stopping(deadline) && !(fencing = caller.acquire(key, token))) {
    ++result.attempts;
    ++result.unavailable;
    std::this_thread::sleep_for(kPollInterval);
  }
  if (!fencing) return result;
  ++result.attempts;
  ++result.acquisitions;
  dlm::oracle::Hold hold;
  hold.key = key.id;
  hold.worker = worker;
  hold.fencing = *fencing;
  hold.startNs = dlm::oracle::steadyNowNs();
  auto nextExtend = std::chrono::steady_clock::now() + kLongExtendEvery;
  while (!stopping(deadline)) {
    if (std::chrono::steady_clock::now() >= nextExtend) {
      caller.extend(key, token);
      ++stats.longExtends;
      nextExtend += kLongExtendEvery;
    }
    std::this_thread::sleep_for(20ms);
  }
  hold.endNs = dlm::oracle::steadyNowNs();
  hold.released = caller.release(key, token);
  if (!hold.released) ++result.failedReleases;
  result.holds.push_back(hold);
  return result;
}

// The previous release's release channel: LISTEN on a connection of its own,
// counting what arrives (it only wakes waiters early; they poll anyway).
void listen(const std::string& conninfo, PreviousReleaseStats& stats,
            std::chrono::steady_clock::time_point deadline) {
  Conn conn(PQconnectdb(conninfo.c_str()));
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    stats.addError(std::string("LISTEN connection: ") +
                   PQerrorMessage(conn.get()));
    return;
  }
  Result listened(PQexec(conn.get(), kListen));
  if (!listened || PQresultStatus(listened.get()) != PGRES_COMMAND_OK) {
    stats.addError(std::string(kListen) + ": " + PQerrorMessage(conn.get()));
    return;
  }
  while (!stopping(deadline)) {
    pollfd fd{PQsocket(conn.get()), POLLIN, 0};
    // Short, so that a stop is noticed within 100 ms.
    if (poll(&fd, 1, 100) < 0) continue;  // EINTR (the stop signal)
    if (PQconsumeInput(conn.get()) == 0) {
      stats.addError(std::string("release channel: ") +
                     PQerrorMessage(conn.get()));
      return;
    }
    while (PGnotify* n = PQnotifies(conn.get())) {
      ++stats.notifications;
      PQfreemem(n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"a worker speaking the previous dlm release's SQL"};
  std::string conninfo, schema, out, statsOut;
  int worker = 0, threads = 1;
  std::int64_t startAtNs = 0;
  double maxSeconds = 60;
  app.add_option("--conninfo", conninfo)->required();
  app.add_option("--schema", schema)->required();
  app.add_option("--worker", worker)->required()->check(CLI::Range(0, 99999));
  app.add_option("--threads", threads)->required()->check(CLI::Range(1, 64));
  app.add_option("--start-at-ns", startAtNs)->required();
  app.add_option("--max-seconds", maxSeconds)->check(CLI::Range(0.01, 600.0));
  app.add_option("--out", out)->required();
  app.add_option("--stats", statsOut)->required();
  std::string longKey;
  bool longHolder = false;
  app.add_option("--long-key", longKey,
                 "a lock id outside the scenario: probed now and then");
  app.add_flag("--long-holder", longHolder,
               "hold --long-key for the whole run on one more thread");
  // A bad command line from the test: no result file to write.
  CLI11_PARSE(app, argc, argv);

  struct sigaction action {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  const auto window = dlm::test::contention::runWindow(startAtNs, maxSeconds);
  conninfo += " application_name=dlm_previous_release";
  ContendResult merged;
  PreviousReleaseStats mergedStats;
  if (longHolder && longKey.empty()) {
    std::fprintf(stderr, "--long-holder needs --long-key\n");
    return 2;
  }
  std::optional<KeyParams> longParams;
  if (!longKey.empty()) longParams = keyParams(longKey, 1);
  // One session per contender thread, and one for the long hold.
  const int sessionCount = threads + (longHolder ? 1 : 0);
  std::vector<PreviousReleaseStats> stats(
      static_cast<std::size_t>(sessionCount));
  std::vector<std::unique_ptr<Session>> sessions;
  try {
    for (int t = 0; t < sessionCount; ++t) {
      sessions.push_back(std::make_unique<Session>(
          conninfo, schema, stats[static_cast<std::size_t>(t)]));
      sessions.back()->open();
    }
    // What the previous release's initialize() checked: exactly its version.
    auto v = sessions.front()->call(kVersion, {});
    if (!v || PQntuples(v->get()) != 1 || PQgetisnull(v->get(), 0, 0) ||
        std::stoi(PQgetvalue(v->get(), 0, 0)) != kPreviousSchemaVersion) {
      throw std::runtime_error(
          "the schema is not at version " +
          std::to_string(kPreviousSchemaVersion) +
          " (the previous release's initialize() would refuse it)");
    }
  } catch (const std::exception& e) {
    merged.error = std::string("previous release worker: ") + e.what();
    sessions.clear();
  }

  if (!sessions.empty()) {
    std::vector<ContendResult> results(static_cast<std::size_t>(sessionCount));
    PreviousReleaseStats listenStats;
    std::vector<std::thread> pool;
    const KeyParams* probe = longParams ? &*longParams : nullptr;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const auto i = static_cast<std::size_t>(t);
        results[i] = contend(*sessions[i], stats[i], worker * 100 + t, probe,
                             window.startAt, window.deadline);
      });
    }
    if (longHolder) {
      pool.emplace_back([&] {
        const auto i = static_cast<std::size_t>(threads);
        results[i] = holdAcross(*sessions[i], stats[i], worker * 100 + 99,
                                *longParams, window.startAt, window.deadline);
      });
    }
    pool.emplace_back([&] { listen(conninfo, listenStats, window.deadline); });
    for (auto& th : pool) th.join();
    for (const auto& r : results) {
      merged.attempts += r.attempts;
      merged.acquisitions += r.acquisitions;
      merged.unavailable += r.unavailable;
      merged.failedReleases += r.failedReleases;
      merged.holds.insert(merged.holds.end(), r.holds.begin(), r.holds.end());
    }
    mergedStats.merge(listenStats);
  }
  for (const auto& s : stats) mergedStats.merge(s);

  std::ofstream file(out);
  dlm::oracle::writeResult(merged, file);
  file.flush();
  std::ofstream statsFile(statsOut);
  dlm::test::upgrade::writeStats(mergedStats, statsFile);
  statsFile.flush();
  if (!file || !statsFile) {
    std::fprintf(stderr, "dlm_previous_release_worker: cannot write %s\n",
                 (!file ? out : statsOut).c_str());
    return 3;
  }
  if (!merged.error.empty()) {
    std::fprintf(stderr, "%s\n", merged.error.c_str());
  }
  for (const auto& m : mergedStats.errorMessages) {
    std::fprintf(stderr, "dlm_previous_release_worker %d: %s\n", worker,
                 m.c_str());
  }
  return merged.ok() && mergedStats.errors == 0 ? 0 : 1;
}
