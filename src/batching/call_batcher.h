// CallBatcher: concurrent store calls of one kind made by one manager's
// threads go to the store together (docs/design.md, "Set-based when busy").
//
// No timer: a call made while fewer than maxInFlight batches of its kind
// are at the store goes at once, alone or with whatever queued before it.
// Calls made while maxInFlight batches are out queue; when one comes back,
// the first queued caller takes the queue (up to maxBatch calls) to the
// store as one batch, on its own thread. So a lone caller never waits for
// company, and under load each trip to the store carries the calls that
// arrived during the previous one. A batch that comes back wakes its own
// members and that first queued caller, nobody else.
//
// A batch runs under the earliest deadline of its members, so it is over
// (answered or failed) by the time each member's deadline comes and a
// member never waits past its own. A member still queued when its deadline
// passes leaves the queue: nothing of it was sent.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/hidden.h"
#include "common/wake_semaphore.h"
#include "dlm/deadline.h"
#include "dlm/error.h"

namespace dlm::internal {

template <typename Request, typename Outcome>
class DLM_HIDDEN CallBatcher {
 public:
  // Sends a batch to the store (one request: the single call) and returns
  // one outcome per request, in order; throws when the whole call failed.
  using RunBatch =
      std::function<std::vector<Outcome>(const std::vector<Request>&)>;

  CallBatcher(RunBatch run, std::size_t maxBatch, int maxInFlight)
      : run_(std::move(run)),
        maxBatch_(maxBatch < 1 ? 1 : maxBatch),
        maxInFlight_(maxInFlight < 1 ? 1 : maxInFlight) {}
  CallBatcher(const CallBatcher&) = delete;
  CallBatcher& operator=(const CallBatcher&) = delete;

  // `request` (and what it refers to) must stay valid until this returns.
  // Runs under the calling thread's deadline (currentDeadline(), else
  // `fallback` from now). Returns the request's outcome or throws what its
  // batch threw; a transient CONNECTION_ERROR when the deadline passed while
  // it was still queued.
  Outcome call(const Request& request, std::chrono::milliseconds fallback) {
    // A call made from inside this thread's own batch (an event handler run
    // by the store call, which may call the manager) goes alone at once:
    // queued, it would wait for the batch that waits for it.
    if (leading(this)) {
      const DeadlineScope scope(deadlineOr(fallback));
      return std::move(runBatch(std::vector<Request>{request}).front());
    }
    Member self(&request, deadlineOr(fallback));
    std::unique_lock<std::mutex> lock(mutex_);
    queue_.push_back(&self);
    while (!self.taken) {
      if (inFlight_ < maxInFlight_) {
        if (lead(lock, &self)) return self.result();
        lock.lock();
        continue;
      }
      lock.unlock();
      const bool woken = self.waitForWake();
      if (woken && self.done()) return self.awaitResult();
      lock.lock();
      if (!woken && !self.taken) {
        queue_.erase(std::find(queue_.begin(), queue_.end(), &self));
        // It may have been woken to lead as its deadline came.
        wakeNextLeader();
        throw DLMException(ErrorCode::CONNECTION_ERROR,
                           "the call's deadline passed while it waited for "
                           "its turn at the store",
                           true);
      }
    }
    lock.unlock();
    // Its batch ends by this member's deadline (see lead).
    return self.awaitResult();
  }

  // Calls of this kind now at the store or queued (for tests).
  std::size_t pending() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.size() + running_;
  }

 private:
  // A call, from when it queues until it returns. Each waits on a semaphore
  // of its own: a finished batch wakes its own members, and one queued
  // member when the next batch may go, not every waiting caller.
  class Member {
   public:
    Member(const Request* r, Deadline d) : request(r), deadline(d) {}

    // Takes one wake-up (to lead, or its batch is done); false when its
    // deadline came first.
    bool waitForWake() {
      if (!woken_.waitUntil(deadline)) return false;
      ++wakesTaken_;
      return true;
    }
    bool done() const { return done_.load(std::memory_order_acquire); }
    // Waits until its batch is done and it took every wake-up posted to it
    // (after which nobody touches it), then returns the result.
    Outcome awaitResult() {
      while (!done()) {
        woken_.wait();
        ++wakesTaken_;
      }
      // Its wakes to lead, all posted before it was taken, and finish's.
      while (wakesTaken_ < wakesToLead + 1) {
        woken_.wait();
        ++wakesTaken_;
      }
      return result();
    }
    // By its batch's leader, after outcome or error was set.
    void finish() {
      done_.store(true, std::memory_order_release);
      woken_.post();
    }
    // With the batcher's mutex held and the member queued, so that every
    // such wake-up was posted by the time it is taken or leaves.
    void wakeToLead() {
      ++wakesToLead;
      woken_.post();
    }
    // Once done.
    Outcome result() {
      if (error) std::rethrow_exception(error);
      return std::move(*outcome);
    }

    const Request* const request;
    const Deadline deadline;
    bool taken = false;   // guarded by the batcher's mutex_
    int wakesToLead = 0;  // guarded by the batcher's mutex_ while queued
    std::optional<Outcome> outcome;
    std::exception_ptr error;

   private:
    WakeSemaphore woken_;
    std::atomic<bool> done_{false};
    int wakesTaken_ = 0;  // by its own thread
  };

  // run_, checked to answer one outcome per request.
  std::vector<Outcome> runBatch(const std::vector<Request>& requests) const {
    std::vector<Outcome> outcomes = run_(requests);
    if (outcomes.size() != requests.size()) {
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         "a store's batch call answered a different number "
                         "of outcomes than it was asked");
    }
    return outcomes;
  }

  // With mutex_ held: when another batch may go, wakes the queue's first
  // member to lead it (only it: whoever else is queued goes with it or
  // after it).
  void wakeNextLeader() {
    if (!queue_.empty() && inFlight_ < maxInFlight_) {
      queue_.front()->wakeToLead();
    }
  }

  // Takes the queue's first maxBatch members (the caller's own among them:
  // it is queued and not taken, so it is in the queue; the queue is served
  // first come, first served, and the caller joins it at the back, so it is
  // taken now or by a batch that runs before it can lead again) to the
  // store, with `lock` released meanwhile, and answers them. Returns with
  // `lock` released; true when `caller` was in the batch.
  bool lead(std::unique_lock<std::mutex>& lock, const Member* caller) {
    std::vector<Member*> batch;
    batch.reserve(std::min(queue_.size(), maxBatch_));
    Deadline deadline = Deadline::max();
    while (!queue_.empty() && batch.size() < maxBatch_) {
      Member* m = queue_.front();
      queue_.pop_front();
      m->taken = true;
      deadline = std::min(deadline, m->deadline);
      batch.push_back(m);
    }
    ++inFlight_;
    running_ += batch.size();
    wakeNextLeader();
    lock.unlock();
    std::vector<Outcome> outcomes;
    std::exception_ptr failed;
    try {
      std::vector<Request> requests;
      requests.reserve(batch.size());
      for (const Member* m : batch) requests.push_back(*m->request);
      const DeadlineScope scope(deadline);
      const Leading mark(this);
      outcomes = runBatch(requests);
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    --inFlight_;
    running_ -= batch.size();
    wakeNextLeader();
    lock.unlock();
    // Taken members wait for finish() alone, so they are answered outside
    // mutex_ (they cannot leave before it).
    bool callerTaken = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Member* m = batch[i];
      if (failed) {
        m->error = failed;
      } else {
        m->outcome = std::move(outcomes[i]);
      }
      // The caller answers itself: nobody waits for it.
      if (m == caller) {
        callerTaken = true;
      } else {
        m->finish();
      }
    }
    return callerTaken;
  }

  // Marks the calling thread as running a batch of `batcher` while it
  // lives; the marks of nested batches (of other kinds) form a chain.
  class Leading {
   public:
    explicit Leading(const void* batcher) : batcher_(batcher), outer_(top()) {
      top() = this;
    }
    ~Leading() { top() = outer_; }
    Leading(const Leading&) = delete;
    Leading& operator=(const Leading&) = delete;

    static bool of(const void* batcher) {
      for (const Leading* l = top(); l != nullptr; l = l->outer_) {
        if (l->batcher_ == batcher) return true;
      }
      return false;
    }

   private:
    static const Leading*& top() {
      thread_local const Leading* innermost = nullptr;
      return innermost;
    }
    const void* const batcher_;
    const Leading* const outer_;
  };
  static bool leading(const void* batcher) { return Leading::of(batcher); }

  const RunBatch run_;
  const std::size_t maxBatch_;
  const int maxInFlight_;
  mutable std::mutex mutex_;
  std::deque<Member*> queue_;  // guarded by mutex_
  int inFlight_ = 0;           // guarded by mutex_
  std::size_t running_ = 0;    // guarded by mutex_
};

}  // namespace dlm::internal
