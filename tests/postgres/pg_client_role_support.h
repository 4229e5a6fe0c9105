// Shared by the PostgreSQL tests of commitLock, release notifications and
// the wait-for graph: a migrated schema used through a dlm_client-only role,
// a recording ReleaseListener and a raw LISTEN connection.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "dlm/postgres_store.h"
#include "postgres/pg_migrate.h"
#include "postgres/pg_release_channel.h"
#include "support/eventually.h"
#include "support/pg_test_support.h"
#include "support/test_keys.h"

namespace dlm::test {

using namespace std::chrono_literals;

// A schema at the newest version, made by the admin connection
// (support/pg_test_support.h).
using AdminMigratedSchema = MigratedSchema;

// Stores on a fresh migrated schema, each as another process would have,
// logged in as a role that has nothing but dlm_client (operator calls:
// newAdminStore, dlm_admin only).
class ClientStores {
 public:
  ClientStores() : role_(schema_.admin()), adminRole_(schema_.admin()) {}

  // libpq connection string of the client role; `extra` is appended
  // ("application_name=x").
  std::string conninfo(const std::string& extra = "") const {
    return fmt::format("user={} {}", role_.name(), extra);
  }
  std::unique_ptr<PostgresStore> newStore(const std::string& extra = "") {
    auto store =
        std::make_unique<PostgresStore>(schema_.options(conninfo(extra)));
    store->initialize(false);
    return store;
  }
  // A store logged in with a role that has only dlm_admin, for the
  // operator calls (forceRelease, purgeIdle).
  std::unique_ptr<PostgresStore> newAdminStore() {
    return std::make_unique<PostgresStore>(
        schema_.options(fmt::format("user={}", adminRole_.name())));
  }
  FreshSchema& schema() { return schema_; }
  const std::string& role() const { return role_.name(); }
  pqxx::connection& admin() { return schema_.admin(); }
  // "<schema>.<table>", quoted.
  std::string table(const std::string& name) {
    return admin().quote_name(schema_.name()) + "." + name;
  }

 private:
  AdminMigratedSchema schema_;  // first: creates dlm_client for the role
  ClientRole role_;
  AdminRole adminRole_;
};

inline AcquireResult acquireAs(LockStore& store, const StoreKey& key,
                               const std::string& owner,
                               const std::string& token,
                               std::chrono::milliseconds ttl = 30s) {
  const Holder holder{"test-host", 1};
  return store.tryAcquire(AcquireRequest{key, owner, token, ttl, holder});
}

inline WaitRegistration waitAs(LockStore& store, const StoreKey& key,
                               const std::string& owner,
                               std::chrono::milliseconds maxWait = 30s) {
  return store.registerWait(WaitRequest{key, owner, maxWait});
}

// store.commitLock through a PostgresTransaction adapter of `tx`.
inline void commitLockTx(LockStore& store, pqxx::transaction_base& tx,
                         const StoreKey& key, const std::string& token) {
  PostgresTransaction adapter(tx);
  store.commitLock(adapter, key, token, dlm::LockMode::EXCLUSIVE);
}

// Records what a store delivers.
class RecordingListener final : public ReleaseListener {
 public:
  void released(std::string_view key) override {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.emplace_back(key);
    changed_.notify_all();
  }
  void missedReleases() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++missed_;
    changed_.notify_all();
  }

  // True once `key` was delivered (within `limit`).
  bool waitFor(const std::string& key, std::chrono::milliseconds limit = 2s) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return seenLocked(key); });
  }
  // True once missedReleases() was called at least `n` times.
  bool waitForMissed(int n, std::chrono::milliseconds limit = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, limit, [&] { return missed_ >= n; });
  }
  bool seen(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return seenLocked(key);
  }
  std::vector<std::string> keys() {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_;
  }
  int missed() {
    std::lock_guard<std::mutex> lock(mu_);
    return missed_;
  }

 private:
  bool seenLocked(const std::string& key) const {
    for (const auto& k : keys_) {
      if (k == key) return true;
    }
    return false;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> keys_;
  int missed_ = 0;
};

// LISTEN dlm_release on an admin connection of its own, to see exactly what
// the server sends.
class RawListener {
 public:
  // `schema`: where dlm lives (for payloadOf).
  explicit RawListener(std::string schema)
      : schema_(std::move(schema)),
        conn_(adminConnection()),
        receiver_(*conn_, payloads_) {}

  // What the server sends when `key` is freed (schema 14 on: hints, not
  // the key).
  std::string payloadOf(const std::string& key) {
    pqxx::nontransaction tx(*conn_);
    return tx.exec_params1("SELECT " + conn_->quote_name(schema_) +
                               ".dlm_release_payload($1)",
                           key)[0]
        .as<std::string>();
  }

  // Waits (up to `limit`) for the notification of `key`'s release; returns
  // the payloads received before it, or throws when it never came.
  std::vector<std::string> until(const std::string& key,
                                 std::chrono::milliseconds limit = 2s) {
    const std::string payload = payloadOf(key);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      for (std::size_t i = 0; i < payloads_.size(); ++i) {
        if (payloads_[i] == payload) {
          std::vector<std::string> before(payloads_.begin(),
                                          payloads_.begin() + i);
          payloads_.erase(payloads_.begin(), payloads_.begin() + i + 1);
          return before;
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        throw std::runtime_error("no notification for " + key);
      }
      conn_->await_notification(0, 50000);
    }
  }

 private:
  class Receiver final : public pqxx::notification_receiver {
   public:
    Receiver(pqxx::connection& c, std::vector<std::string>& sink)
        : pqxx::notification_receiver(c, internal::kReleaseChannel),
          sink_(sink) {}
    void operator()(const std::string& payload, int) override {
      sink_.push_back(payload);
    }

   private:
    std::vector<std::string>& sink_;
  };

  const std::string schema_;
  std::unique_ptr<pqxx::connection> conn_;
  std::vector<std::string> payloads_;
  Receiver receiver_;
};

// Releases a fresh key that someone waits for, so that it is announced: a
// listener that receives it has also received everything committed before
// it (notifications arrive in commit order on one connection).
inline std::string releaseMarker(LockStore& store, const std::string& scope) {
  static int counter = 0;
  const StoreKey marker = pathKey(scope, fmt::format("marker{}", ++counter));
  EXPECT_TRUE(
      acquireAs(store, marker, "marker-holder", "marker-token").acquired);
  EXPECT_TRUE(waitAs(store, marker, "marker-waiter").deadlockCycle.empty());
  EXPECT_TRUE(store.release(marker, "marker-token", dlm::LockMode::EXCLUSIVE));
  store.unregisterWait(marker.key, "marker-waiter");
  return marker.key;
}

}  // namespace dlm::test
