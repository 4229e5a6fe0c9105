// An in-memory LockStore with the stores' semantics (hierarchy, tokens,
// fencing, expiry) and a settable clock, for fast manager tests.
#pragma once

#include <map>
#include <mutex>

#include "dlm/lock_store.h"

namespace dlm::test {

class FakeStore final : public LockStore {
 public:
  std::string_view name() const override { return "fake"; }
  void initialize(bool) override {}
  void close() override {}
  AcquireResult tryAcquire(const AcquireRequest& request) override;
  bool release(std::string_view key, std::string_view token) override;
  std::optional<StoreTime> extend(std::string_view key, std::string_view token,
                                  std::chrono::milliseconds ttl) override;
  std::optional<LockRecord> describe(std::string_view key) override;
  std::vector<LockRecord> listHeld(std::string_view prefix) override;
  bool forceRelease(std::string_view key) override;
  StoreTime now() override;

  // Moves the store's clock forward.
  void advance(std::chrono::milliseconds by);

 private:
  struct Row {
    LockRecord record;
    std::string token;
  };
  bool heldAt(const Row& row, StoreTime at) const;

  std::mutex mutex_;
  std::map<std::string, Row, std::less<>> rows_;
  StoreTime now_ = StoreTime(std::chrono::hours(24 * 365 * 50));
};

}  // namespace dlm::test
