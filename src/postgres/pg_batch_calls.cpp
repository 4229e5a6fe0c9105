// PostgresStore: the batch calls (schema 19). The keys the set-based
// functions serve (EXCLUSIVE, no ancestors) go to the server in one call;
// every key it answers 'single' (its row locked elsewhere or missing, a
// check it leaves to the single call) and every key it does not serve go
// through the single call afterwards, so each key's answer, and error, is
// the single call's.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/crc32.h"
#include "common/key_order.h"
#include "common/utf8.h"
#include "postgres/pg_array.h"
#include "postgres/pg_results.h"
#include "postgres/pg_statements.h"
#include "postgres/pg_store_impl.h"

namespace dlm {

using internal::fromEpochMs;
using internal::Params;
using internal::PgConn;
using internal::PgResult;

namespace {

// The most keys one batch call sends: dlm_limits.max_keys_per_call's
// default. A database whose admin lowered it refuses the call (22023) and
// its keys go through the single call.
constexpr std::size_t kMaxBatchKeys = 64;

// The statement's answer for one request.
enum class Answer { kSingle, kDone, kRefused };

// Builds a text[] literal of one field of the requests `picked`.
template <typename Field>
std::string textArrayOf(const std::vector<std::size_t>& picked, Field field) {
  std::vector<std::string_view> items;
  std::vector<bool> nulls;
  items.reserve(picked.size());
  for (const std::size_t i : picked) {
    const std::string_view v = field(i);
    items.push_back(v);
    nulls.push_back(v.data() == nullptr);
  }
  return internal::textArrayLiteral(items, nulls);
}

// A descendant bound as the functions take it: NULL without hierarchy.
std::string_view boundOrNullView(const std::string& bound) {
  return bound.empty() ? std::string_view() : std::string_view(bound);
}

// Runs a batch call. A failure that may not have reached the server's
// answer (transient: the connection, the deadline) is the whole batch's: no
// key's outcome is known. Any other (the server refused the call itself,
// e.g. a lowered max_keys_per_call) leaves every key to the single call.
template <typename Fn>
void batchOrSingles(std::vector<Answer>& answers, Fn&& fn) {
  try {
    fn();
  } catch (const DLMException& e) {
    if (e.transient()) throw;
    std::fill(answers.begin(), answers.end(), Answer::kSingle);
  }
}

// Sends every key the batch left (answered 'single', or not served) through
// the single call `single(i)`, which fills outcomes[i]; its error is that
// key's own.
template <typename Outcome, typename Single>
void singlesWhereLeft(const std::vector<Answer>& answers,
                      std::vector<Outcome>& outcomes, Single&& single) {
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (answers[i] != Answer::kSingle) continue;
    try {
      single(i);
    } catch (const DLMException& e) {
      outcomes[i].error = e;
    }
  }
}

}  // namespace

std::vector<AcquireOutcome> PostgresStore::Impl::tryAcquireEach(
    const std::vector<AcquireRequest>& requests) {
  std::vector<AcquireOutcome> outcomes(requests.size());
  std::vector<Answer> answers(requests.size(), Answer::kSingle);
  // The keys the set-based call serves, each once; a later request of the
  // same key (another thread of the manager) is answered from the first's.
  std::vector<std::size_t> picked;
  std::unordered_map<std::string_view, std::size_t> firstOf;
  std::vector<std::size_t> sameAs(requests.size(), requests.size());
  const Holder* holder = nullptr;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const AcquireRequest& r = requests[i];
    if (r.mode != LockMode::EXCLUSIVE || !r.key.ancestors.empty() ||
        !internal::isValidUtf8(r.key.key) || !internal::isValidUtf8(r.owner) ||
        !internal::isValidUtf8(r.token)) {
      continue;
    }
    if (holder == nullptr) holder = &r.holder;
    if (r.holder.host != holder->host || r.holder.pid != holder->pid) continue;
    const auto [it, fresh] = firstOf.emplace(r.key.key, i);
    if (fresh) {
      picked.push_back(i);
    } else {
      sameAs[i] = it->second;
    }
  }
  if (requests.size() > 1 && !picked.empty() &&
      picked.size() <= kMaxBatchKeys) {
    const auto at = [&](std::size_t i) -> const AcquireRequest& {
      return requests[i];
    };
    const std::string keys = textArrayOf(
        picked,
        [&](std::size_t i) -> std::string_view { return at(i).key.key; });
    const std::string descBegin = textArrayOf(picked, [&](std::size_t i) {
      return boundOrNullView(at(i).key.descendantsBegin);
    });
    const std::string descEnd = textArrayOf(picked, [&](std::size_t i) {
      return boundOrNullView(at(i).key.descendantsEnd);
    });
    const std::string owners =
        textArrayOf(picked, [&](std::size_t i) { return at(i).owner; });
    const std::string tokens =
        textArrayOf(picked, [&](std::size_t i) { return at(i).token; });
    std::vector<std::int64_t> ttlValues;
    for (const std::size_t i : picked) ttlValues.push_back(at(i).ttl.count());
    const std::string ttls = internal::bigintArrayLiteral(ttlValues);
    const std::string pid = std::to_string(holder->pid);
    const Params params{
        keys.c_str(),   descBegin.c_str(), descEnd.c_str(),      owners.c_str(),
        tokens.c_str(), ttls.c_str(),      holder->host.c_str(), pid.c_str()};
    batchOrSingles(answers, [&] {
      run("acquire", at(picked.front()).key.key, [&](PgConn& c, Deadline d) {
        const PgResult r =
            c.execPrepared(internal::pgStatements().acquireEach, params, d);
        internal::rowPerKey(r, picked.size(), "dlm_try_acquire_each");
        for (int row = 0; row < r.rows(); ++row) {
          const std::size_t i = picked[static_cast<std::size_t>(row)];
          const std::string outcome = r.text(row, 1);
          AcquireResult& result = outcomes[i].result;
          if (outcome == "acquired") {
            result.acquired = true;
            result.fencingToken = r.int64(row, 2);
            result.acquiredAt = fromEpochMs(r, row, 3);
            result.expiresAt = fromEpochMs(r, row, 4);
            answers[i] = Answer::kDone;
          } else if (outcome == "held") {
            result.blockedBy = requests[i].key.key;
            answers[i] = Answer::kRefused;
          }
        }
      });
    });
    // A second request of a key the batch answered: held, by the first's
    // grant or by the holder that refused the first.
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (sameAs[i] < requests.size() &&
          answers[sameAs[i]] != Answer::kSingle) {
        outcomes[i].result.blockedBy = requests[i].key.key;
        answers[i] = Answer::kRefused;
      }
    }
  }
  singlesWhereLeft(answers, outcomes, [&](std::size_t i) {
    outcomes[i].result = tryAcquire(requests[i]);
  });
  return outcomes;
}

std::vector<ReleaseOutcome> PostgresStore::Impl::releaseEach(
    const std::vector<ReleaseRequest>& requests) {
  std::vector<ReleaseOutcome> outcomes(requests.size());
  std::vector<Answer> answers(requests.size(), Answer::kSingle);
  std::vector<std::size_t> picked;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ReleaseRequest& r = requests[i];
    if (r.mode == LockMode::EXCLUSIVE && r.key.ancestors.empty() &&
        internal::isValidUtf8(r.key.key) && internal::isValidUtf8(r.token)) {
      picked.push_back(i);
    }
  }
  if (picked.size() > 1 && picked.size() <= kMaxBatchKeys) {
    const std::string keys = textArrayOf(
        picked,
        [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
    const std::string tokens =
        textArrayOf(picked, [&](std::size_t i) { return requests[i].token; });
    const std::string descEnd = textArrayOf(picked, [&](std::size_t i) {
      return boundOrNullView(requests[i].key.descendantsEnd);
    });
    const Params params{keys.c_str(), tokens.c_str(), descEnd.c_str()};
    batchOrSingles(answers, [&] {
      run("release", requests[picked.front()].key.key,
          [&](PgConn& c, Deadline d) {
            const PgResult r =
                c.execPrepared(internal::pgStatements().releaseEach, params, d);
            internal::rowPerKey(r, picked.size(), "dlm_release_each");
            for (int row = 0; row < r.rows(); ++row) {
              const std::size_t i = picked[static_cast<std::size_t>(row)];
              const std::string outcome = r.text(row, 1);
              if (outcome == "single") continue;
              outcomes[i].released = outcome == "released";
              answers[i] = Answer::kDone;
            }
          });
    });
  }
  singlesWhereLeft(answers, outcomes, [&](std::size_t i) {
    const ReleaseRequest& r = requests[i];
    outcomes[i].released = release(r.key, r.token, r.mode);
  });
  return outcomes;
}

std::vector<ExtendOutcome> PostgresStore::Impl::extendEach(
    const std::vector<ExtendRequest>& requests) {
  std::vector<ExtendOutcome> outcomes(requests.size());
  std::vector<Answer> answers(requests.size(), Answer::kSingle);
  std::vector<std::size_t> picked;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const ExtendRequest& r = requests[i];
    if (r.mode == LockMode::EXCLUSIVE && internal::isValidUtf8(r.key) &&
        internal::isValidUtf8(r.token)) {
      picked.push_back(i);
    }
  }
  // Keep-alive renews more than a call's cap of keys: in chunks.
  const std::size_t chunk = kMaxBatchKeys;
  for (std::size_t from = 0; picked.size() > 1 && from < picked.size();
       from += chunk) {
    const std::vector<std::size_t> part(
        picked.begin() + static_cast<std::ptrdiff_t>(from),
        picked.begin() +
            static_cast<std::ptrdiff_t>(std::min(picked.size(), from + chunk)));
    if (part.size() < 2) break;
    const std::string keys =
        textArrayOf(part, [&](std::size_t i) { return requests[i].key; });
    const std::string tokens =
        textArrayOf(part, [&](std::size_t i) { return requests[i].token; });
    std::vector<std::int64_t> ttlValues;
    for (const std::size_t i : part)
      ttlValues.push_back(requests[i].ttl.count());
    const std::string ttls = internal::bigintArrayLiteral(ttlValues);
    const Params params{keys.c_str(), tokens.c_str(), ttls.c_str()};
    batchOrSingles(answers, [&] {
      run("extend", requests[part.front()].key, [&](PgConn& c, Deadline d) {
        const PgResult r =
            c.execPrepared(internal::pgStatements().extendEach, params, d);
        internal::rowPerKey(r, part.size(), "dlm_extend_each");
        for (int row = 0; row < r.rows(); ++row) {
          const std::size_t i = part[static_cast<std::size_t>(row)];
          const std::string outcome = r.text(row, 1);
          if (outcome == "single") continue;
          if (outcome == "extended")
            outcomes[i].expiresAt = fromEpochMs(r, row, 2);
          answers[i] = Answer::kDone;
        }
      });
    });
  }
  singlesWhereLeft(answers, outcomes, [&](std::size_t i) {
    const ExtendRequest& r = requests[i];
    outcomes[i].expiresAt = extend(r.key, r.token, r.ttl, r.mode);
  });
  return outcomes;
}

AcquireAllResult PostgresStore::Impl::tryAcquireAll(
    const std::vector<AcquireRequest>& requests) {
  if (requests.empty()) {
    throw DLMException(ErrorCode::INVALID_ARGUMENT,
                       "PostgreSQL store: tryAcquireAll: no keys");
  }
  const std::vector<std::size_t> order = internal::indicesInKeyOrder(
      requests.size(),
      [&](std::size_t i) -> std::string_view { return requests[i].key.key; });
  std::vector<std::string> paths(requests.size()), crcs(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const StoreKey& key = requests[i].key;
    std::vector<std::string_view> path(key.ancestors.begin(),
                                       key.ancestors.end());
    path.emplace_back(key.key);
    std::vector<std::int64_t> crc;
    for (const std::string_view k : path) crc.push_back(internal::crc32(k));
    for (const std::string_view k : path) {
      if (!internal::isValidUtf8(k)) {
        throw DLMException(
            ErrorCode::INVALID_ARGUMENT,
            fmt::format("PostgreSQL store: acquire {}: not valid UTF-8",
                        internal::printableBytes(k)));
      }
    }
    paths[i] = internal::textArrayLiteral(path);
    crcs[i] = internal::bigintArrayLiteral(crc);
  }
  const auto all = [&](auto field) { return textArrayOf(order, field); };
  const std::string pathArray =
      all([&](std::size_t i) -> std::string_view { return paths[i]; });
  const std::string crcArray =
      all([&](std::size_t i) -> std::string_view { return crcs[i]; });
  const std::string descBegin = all([&](std::size_t i) {
    return boundOrNullView(requests[i].key.descendantsBegin);
  });
  const std::string descEnd = all([&](std::size_t i) {
    return boundOrNullView(requests[i].key.descendantsEnd);
  });
  const std::string owners =
      all([&](std::size_t i) { return requests[i].owner; });
  const std::string tokens =
      all([&](std::size_t i) { return requests[i].token; });
  std::vector<std::int64_t> ttlValues;
  std::string shared = "{";
  for (const std::size_t i : order) {
    ttlValues.push_back(requests[i].ttl.count());
    if (shared.size() > 1) shared += ',';
    shared += requests[i].mode == LockMode::SHARED ? "t" : "f";
  }
  shared += '}';
  const std::string ttls = internal::bigintArrayLiteral(ttlValues);
  const Holder& holder = requests[order.front()].holder;
  const std::string pid = std::to_string(holder.pid);
  const Params params{pathArray.c_str(), crcArray.c_str(), descBegin.c_str(),
                      descEnd.c_str(),   owners.c_str(),   tokens.c_str(),
                      ttls.c_str(),      shared.c_str(),   holder.host.c_str(),
                      pid.c_str()};
  return run("acquireAll", requests[order.front()].key.key,
             [&](PgConn& c, Deadline d) {
               const PgResult r = c.execPrepared(
                   internal::pgStatements().acquireAll, params, d);
               AcquireAllResult result;
               result.results.resize(requests.size());
               if (r.rows() == 1 && !r.boolean(0, 1)) {
                 result.blockedBy = r.text(0, 5);
                 result.queued = r.boolean(0, 6);
                 return result;
               }
               internal::rowPerKey(r, requests.size(), "dlm_try_acquire_all");
               for (int row = 0; row < r.rows(); ++row) {
                 AcquireResult& one =
                     result.results[order[static_cast<std::size_t>(row)]];
                 one.acquired = true;
                 one.fencingToken = r.int64(row, 2);
                 one.acquiredAt = fromEpochMs(r, row, 3);
                 one.expiresAt = fromEpochMs(r, row, 4);
               }
               result.acquired = true;
               return result;
             });
}

}  // namespace dlm
