// A small, thread-safe pool of libpq connections for the PostgreSQL store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "dlm/deadline.h"
#include "postgres/pg_conn.h"

namespace dlm::internal {

// Hands out connections, each to one thread at a time (a PGconn is not
// thread-safe). At most `maxSize` are open at once; a caller beyond that
// waits for one, up to `maxWait` or its deadline, whichever comes first.
// Connections are opened on demand and kept open when returned; one that
// broke is dropped instead, and a later lease opens a new one.
//
// Generations: every connection is stamped with the pool's generation when
// opened. When a reused connection turns out dead (a server restart, or
// every backend terminated), dropIdle(generation) closes every idle
// connection of that generation or older at once, since they most likely
// died the same way, as well as leased ones of those generations when they
// come back; later connections get a newer generation.
class ConnectionPool {
 public:
  // Opens and sets up one connection by `deadline` (session settings).
  // Throws what PgConn throws (the caller translates it).
  using Connect = std::function<std::unique_ptr<PgConn>(Deadline)>;

  // Opens nothing yet.
  ConnectionPool(std::size_t maxSize, std::chrono::milliseconds maxWait,
                 Connect connect);
  // Closes every connection. No lease may outlive the pool.
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A leased connection; returned to the pool when the lease is destroyed.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    PgConn& operator*() const { return *conn_; }
    PgConn* operator->() const { return conn_.get(); }

    // The connection broke or is in an unknown state: close it on return
    // instead of pooling it. (An unusable connection is never pooled.)
    void discard() noexcept { discard_ = true; }
    // Whether the connection had been used before this lease (an idle one
    // that may have died meanwhile) rather than opened for it.
    bool reused() const { return reused_; }
    std::uint64_t generation() const { return generation_; }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool& pool, std::unique_ptr<PgConn> conn,
          std::uint64_t generation, bool reused);

    ConnectionPool* pool_;  // borrowed; outlives the lease
    std::unique_ptr<PgConn> conn_;
    std::uint64_t generation_;
    bool reused_;
    bool discard_ = false;
  };

  // A pooled connection, or a new one opened by `deadline`. Waits for a free
  // one until min(now + maxWait, deadline). Throws DLMException:
  // CONNECTION_ERROR (transient) when that wait ends, INTERNAL_ERROR "store
  // closed" after close(); a failed connect throws what Connect throws.
  Lease lease(Deadline deadline);

  // Closes the idle connections of `generation` or older now (leased ones
  // when they come back), and makes later connections newer than it.
  void dropIdle(std::uint64_t generation);

  // Closes the idle connections now and leased ones when they come back;
  // every later lease() fails. Idempotent.
  void close();

  // Connections open or being opened (leased + idle), for tests.
  std::size_t openCount() const;

 private:
  struct Idle {
    std::unique_ptr<PgConn> conn;
    std::uint64_t generation;
  };

  void giveBack(std::unique_ptr<PgConn> conn, std::uint64_t generation,
                bool discard) noexcept;

  const std::size_t maxSize_;
  const std::chrono::milliseconds maxWait_;
  const Connect connect_;

  mutable std::mutex mu_;
  std::condition_variable returned_;
  std::vector<Idle> idle_;        // guarded by mu_
  std::size_t open_ = 0;          // guarded by mu_
  std::uint64_t generation_ = 0;  // guarded by mu_
  bool closed_ = false;           // guarded by mu_
};

}  // namespace dlm::internal
