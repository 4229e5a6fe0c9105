#include "postgres/connection_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "dlm/error.h"

namespace dlm::internal {

ConnectionPool::ConnectionPool(std::size_t maxSize,
                               std::chrono::milliseconds maxWait,
                               Connect connect)
    : maxSize_(maxSize == 0 ? 1 : maxSize),
      maxWait_(maxWait),
      connect_(std::move(connect)) {}

ConnectionPool::~ConnectionPool() { close(); }

ConnectionPool::Lease::Lease(ConnectionPool& pool, std::unique_ptr<PgConn> conn,
                             std::uint64_t generation, bool reused)
    : pool_(&pool),
      conn_(std::move(conn)),
      generation_(generation),
      reused_(reused) {}

ConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_),
      conn_(std::move(other.conn_)),
      generation_(other.generation_),
      reused_(other.reused_),
      discard_(other.discard_) {}

ConnectionPool::Lease::~Lease() {
  if (conn_) pool_->giveBack(std::move(conn_), generation_, discard_);
}

ConnectionPool::Lease ConnectionPool::lease(Deadline deadline) {
  // deadlineAfter saturates: a poolWait of years must not wrap around.
  const Deadline waitUntil = std::min(deadline, deadlineAfter(maxWait_));
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t generation;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closed_) {
        throw DLMException(ErrorCode::INTERNAL_ERROR, "store closed");
      }
      if (!idle_.empty()) {
        // Most recently returned first: it is the least likely to have been
        // cut by an idle timeout.
        Idle idle = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(idle.conn), idle.generation, true);
      }
      if (open_ < maxSize_) break;
      if (returned_.wait_until(lock, waitUntil) == std::cv_status::timeout &&
          idle_.empty() && open_ >= maxSize_ && !closed_) {
        throw DLMException(
            ErrorCode::CONNECTION_ERROR,
            fmt::format(
                "no free PostgreSQL connection within {} ms (all {} pooled "
                "connections in use)",
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count(),
                maxSize_),
            true);
      }
    }
    // Reserve the slot before connecting outside the lock, so concurrent
    // callers cannot overshoot maxSize_.
    ++open_;
    generation = generation_;
  }
  try {
    // Connecting takes a round trip or more; other threads keep using the
    // pool meanwhile.
    return Lease(*this, connect_(deadline), generation, false);
  } catch (...) {
    // Free the reserved slot, then let the caller translate the error.
    {
      std::lock_guard<std::mutex> lock(mu_);
      --open_;
    }
    returned_.notify_one();
    throw;
  }
}

void ConnectionPool::giveBack(std::unique_ptr<PgConn> conn,
                              std::uint64_t generation, bool discard) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A connection older than the last drop came back from a call that
    // overlapped it: it is as suspect as the idle ones that were dropped.
    if (!discard && !closed_ && conn->usable() && generation >= generation_) {
      idle_.push_back(Idle{std::move(conn), generation});
    } else {
      --open_;
    }
  }
  returned_.notify_one();
  // A dropped connection (if any) closes here, outside the lock.
  conn.reset();
}

void ConnectionPool::dropIdle(std::uint64_t generation) {
  std::vector<Idle> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_ = std::max(generation_, generation + 1);
    auto stale = std::stable_partition(
        idle_.begin(), idle_.end(),
        [&](const Idle& i) { return i.generation > generation; });
    closing.assign(std::make_move_iterator(stale),
                   std::make_move_iterator(idle_.end()));
    idle_.erase(stale, idle_.end());
    open_ -= closing.size();
  }
  // Free slots: waiters may open new connections.
  returned_.notify_all();
}

void ConnectionPool::close() {
  std::vector<Idle> closing;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    closing.swap(idle_);
    open_ -= closing.size();
  }
  // Wake waiters so they fail with "store closed" instead of timing out.
  returned_.notify_all();
}

std::size_t ConnectionPool::openCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

}  // namespace dlm::internal
