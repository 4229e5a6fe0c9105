// Baseline (g) at N threads: the floor of the batched protocol as the
// library drives it. N threads cycle on keys of their own; their acquire
// and release calls go through the library's own CallBatcher
// (src/batching/call_batcher.h, the manager's policy: no timer, one batch
// of a kind in flight, at most 64 calls per batch), each kind on one
// connection; a batch of several calls is one call of (g)'s set-based
// functions (bench_batch_acquire / bench_batch_release), a lone call (f)'s
// single-key functions (bench_skeleton_acquire / bench_skeleton_release),
// as the library sends a lone call to dlm_try_acquire. No tenancy, limits,
// hierarchy, queue, fencing floor or per-key answers beyond the grant: what
// the batching policy and the batched protocol's shape cost before any of
// dlm's checks or its client-side work (events, metrics, leases).
#pragma once

#include <memory>
#include <string>

namespace dlm_bench {

class ThreadedBatchSkeleton {
 public:
  // Opens two connections (one per kind) to `conninfo`.
  explicit ThreadedBatchSkeleton(const std::string& conninfo);
  ~ThreadedBatchSkeleton();
  ThreadedBatchSkeleton(const ThreadedBatchSkeleton&) = delete;
  ThreadedBatchSkeleton& operator=(const ThreadedBatchSkeleton&) = delete;

  // Acquires `key` (its row must exist and be free) with `token`, then
  // releases it; throws when either was refused. Thread-safe.
  void cycle(const std::string& key, const std::string& token, int ttlMs);
  // Closes the connections (no cycle may run then or after).
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlm_bench
