#include "pg_batch_threads.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "batching/call_batcher.h"
#include "pg_raw.h"
#include "postgres/pg_array.h"

namespace dlm_bench {

namespace {

struct Call {
  const std::string* key;
  const std::string* token;
  int ttlMs;
};

// One field of every call as a text[] literal.
std::string textArray(const std::vector<Call>& calls,
                      const std::string* Call::*field) {
  std::vector<std::string_view> items;
  items.reserve(calls.size());
  for (const Call& c : calls) items.emplace_back(*(c.*field));
  return dlm::internal::textArrayLiteral(items);
}

PgConn& prepared(PgConn& c) {
  c.exec("SET plan_cache_mode = force_generic_plan");
  c.prepare("f_acq", "SELECT bench_skeleton_acquire($1, $2, $3)");
  c.prepare("f_rel", "SELECT bench_skeleton_release($1, $2)");
  c.prepare("g_acq",
            "SELECT o_ord FROM bench_batch_acquire($1::text[], $2::text[], "
            "$3::bigint[])");
  c.prepare("g_rel", "SELECT bench_batch_release($1::text[], $2::text[])");
  return c;
}

}  // namespace

struct ThreadedBatchSkeleton::Impl {
  explicit Impl(const std::string& conninfo)
      : acquireConn(conninfo),
        releaseConn(conninfo),
        acquire([this](const std::vector<Call>& c) { return acquireBatch(c); },
                kMaxBatch, 1),
        release([this](const std::vector<Call>& c) { return releaseBatch(c); },
                kMaxBatch, 1) {
    prepared(acquireConn);
    prepared(releaseConn);
  }

  // One batch of a kind at a time (maxInFlight 1): its connection is free.
  std::vector<bool> acquireBatch(const std::vector<Call>& calls) {
    if (calls.size() == 1) {
      const std::string ttl = std::to_string(calls[0].ttlMs);
      const PgResult r = acquireConn.execPrepared(
          "f_acq",
          {calls[0].key->c_str(), calls[0].token->c_str(), ttl.c_str()});
      return {PQgetisnull(r.get(), 0, 0) == 0};
    }
    const std::string keys = textArray(calls, &Call::key);
    const std::string tokens = textArray(calls, &Call::token);
    std::vector<std::int64_t> ttlValues;
    for (const Call& c : calls) ttlValues.push_back(c.ttlMs);
    const std::string ttls = dlm::internal::bigintArrayLiteral(ttlValues);
    const PgResult r = acquireConn.execPrepared(
        "g_acq", {keys.c_str(), tokens.c_str(), ttls.c_str()});
    std::vector<bool> granted(calls.size(), false);
    for (int row = 0; row < PQntuples(r.get()); ++row) {
      const auto ord = std::stoul(PQgetvalue(r.get(), row, 0));
      granted.at(ord - 1) = true;
    }
    return granted;
  }

  std::vector<bool> releaseBatch(const std::vector<Call>& calls) {
    if (calls.size() == 1) {
      const PgResult r = releaseConn.execPrepared(
          "f_rel", {calls[0].key->c_str(), calls[0].token->c_str()});
      return {PQgetvalue(r.get(), 0, 0)[0] == 't'};
    }
    const std::string keys = textArray(calls, &Call::key);
    const std::string tokens = textArray(calls, &Call::token);
    const PgResult r =
        releaseConn.execPrepared("g_rel", {keys.c_str(), tokens.c_str()});
    // The skeleton answers a count: every key freed, or the batch failed.
    const bool all = std::stoul(PQgetvalue(r.get(), 0, 0)) == calls.size();
    return std::vector<bool>(calls.size(), all);
  }

  static constexpr std::size_t kMaxBatch = 64;
  PgConn acquireConn;
  PgConn releaseConn;
  dlm::internal::CallBatcher<Call, bool> acquire;
  dlm::internal::CallBatcher<Call, bool> release;
};

ThreadedBatchSkeleton::ThreadedBatchSkeleton(const std::string& conninfo)
    : impl_(std::make_unique<Impl>(conninfo)) {}

ThreadedBatchSkeleton::~ThreadedBatchSkeleton() = default;

void ThreadedBatchSkeleton::close() { impl_.reset(); }

void ThreadedBatchSkeleton::cycle(const std::string& key,
                                  const std::string& token, int ttlMs) {
  const Call call{&key, &token, ttlMs};
  constexpr std::chrono::seconds kBound(30);
  if (!impl_->acquire.call(call, kBound)) {
    throw std::runtime_error("baseline g: not granted " + key);
  }
  if (!impl_->release.call(call, kBound)) {
    throw std::runtime_error("baseline g: not freed " + key);
  }
}

}  // namespace dlm_bench
