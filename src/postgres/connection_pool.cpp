#include "postgres/connection_pool.h"

#include <fmt/format.h>

#include <utility>

#include "dlm/error.h"

namespace dlm::internal {

ConnectionPool::ConnectionPool(std::string conninfo, std::size_t maxSize,
                               std::chrono::milliseconds maxWait, Setup setup)
    : conninfo_(std::move(conninfo)),
      maxSize_(maxSize == 0 ? 1 : maxSize),
      maxWait_(maxWait),
      setup_(std::move(setup)) {}

ConnectionPool::~ConnectionPool() { close(); }

ConnectionPool::Lease::Lease(ConnectionPool& pool,
                             std::unique_ptr<pqxx::connection> conn)
    : pool_(&pool), conn_(std::move(conn)) {}

ConnectionPool::Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_),
      conn_(std::move(other.conn_)),
      discard_(other.discard_) {}

ConnectionPool::Lease::~Lease() {
  if (conn_) pool_->giveBack(std::move(conn_), discard_);
}

ConnectionPool::Lease ConnectionPool::lease() {
  const auto deadline = std::chrono::steady_clock::now() + maxWait_;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (closed_) {
        throw DLMException(ErrorCode::INTERNAL_ERROR, "store closed");
      }
      if (!idle_.empty()) {
        // Most recently returned first: it is the least likely to have been
        // cut by an idle timeout.
        std::unique_ptr<pqxx::connection> conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(*this, std::move(conn));
      }
      if (open_ < maxSize_) break;
      if (returned_.wait_until(lock, deadline) == std::cv_status::timeout &&
          idle_.empty() && open_ >= maxSize_ && !closed_) {
        throw DLMException(
            ErrorCode::CONNECTION_ERROR,
            fmt::format("no free PostgreSQL connection within {} ms (all {} "
                        "pooled connections in use)",
                        maxWait_.count(), maxSize_),
            true);
      }
    }
    // Reserve the slot before connecting outside the lock, so concurrent
    // callers cannot overshoot maxSize_.
    ++open_;
  }
  try {
    // Connecting takes a round trip or more; other threads keep using the
    // pool meanwhile.
    auto conn = std::make_unique<pqxx::connection>(conninfo_);
    if (setup_) setup_(*conn);
    return Lease(*this, std::move(conn));
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

void ConnectionPool::giveBack(std::unique_ptr<pqxx::connection> conn,
                              bool discard) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!discard && !closed_ && conn->is_open()) {
      idle_.push_back(std::move(conn));
    } else {
      --open_;
    }
  }
  returned_.notify_one();
  // A dropped connection (if any) closes here, outside the lock.
  conn.reset();
}

void ConnectionPool::close() {
  std::vector<std::unique_ptr<pqxx::connection>> closing;
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
