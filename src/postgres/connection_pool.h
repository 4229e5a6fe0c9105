// A small, thread-safe pool of libpqxx connections for the PostgreSQL store.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <pqxx/connection>
#include <string>
#include <vector>

namespace dlm::internal {

// Hands out connections, each to one thread at a time (a pqxx connection is
// not thread-safe). At most `maxSize` are open at once; a caller beyond that
// waits up to `maxWait` for one to come back. Connections are opened on
// demand and kept open when returned; one that broke is dropped instead, and
// a later lease opens a new one.
class ConnectionPool {
 public:
  // Runs once on every new connection before it is leased: session settings
  // and prepared statement definitions. May throw (the connection is then
  // dropped).
  using Setup = std::function<void(pqxx::connection&)>;

  // `conninfo`: a libpq connection string or URI ("" = PG* variables).
  // Opens nothing yet.
  ConnectionPool(std::string conninfo, std::size_t maxSize,
                 std::chrono::milliseconds maxWait, Setup setup);
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

    pqxx::connection& operator*() const { return *conn_; }
    pqxx::connection* operator->() const { return conn_.get(); }

    // The connection broke or is in an unknown state: close it on return
    // instead of pooling it.
    void discard() noexcept { discard_ = true; }

   private:
    friend class ConnectionPool;
    Lease(ConnectionPool& pool, std::unique_ptr<pqxx::connection> conn);

    ConnectionPool* pool_;  // borrowed; outlives the lease
    std::unique_ptr<pqxx::connection> conn_;
    bool discard_ = false;
  };

  // A pooled connection, or a new one. Blocks up to maxWait when all are
  // leased. Throws DLMException: CONNECTION_ERROR (transient) when the wait
  // times out, INTERNAL_ERROR "store closed" after close(); a failed connect
  // or setup throws the driver's exception (the caller translates it).
  Lease lease();

  // Closes the idle connections now and leased ones when they come back;
  // every later lease() fails. Idempotent.
  void close();

  // Connections open or being opened (leased + idle), for tests.
  std::size_t openCount() const;

 private:
  void giveBack(std::unique_ptr<pqxx::connection> conn, bool discard) noexcept;

  const std::string conninfo_;
  const std::size_t maxSize_;
  const std::chrono::milliseconds maxWait_;
  const Setup setup_;

  mutable std::mutex mu_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;  // guarded by mu_
  std::size_t open_ = 0;                                 // guarded by mu_
  bool closed_ = false;                                  // guarded by mu_
};

}  // namespace dlm::internal
