// The conformance suite's fixture: parameterised by store name, one
// environment (fresh database) per store per test program, and a fresh
// clientId per test so tests never see each other's keys.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "dlm/dlm.h"
#include "support/error_code.h"
#include "support/test_stores.h"

namespace dlm::test {

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // The environment of GetParam(), created on first use.
  StoreEnvironment& env();

  // A manager with its own store object on the shared database, initialized.
  std::unique_ptr<DistributedLockManager> manager(
      const std::string& client = "", const std::string& farm = "farm1",
      LockConfiguration config = fastConfig());

  // The same, reporting its events to `events`.
  std::unique_ptr<DistributedLockManager> observedManager(
      std::shared_ptr<LockEventHandler> events,
      LockConfiguration config = fastConfig());

  // A clientId unique to this test.
  std::string client(const std::string& suffix = "") const;

  static LockConfiguration fastConfig();

  static ErrorCode codeOf(const std::function<void()>& fn) {
    return test::codeOf(fn);
  }
};

// Sleeps until the store's clock is past `until`.
void waitForStoreTime(LockStore& store, StoreTime until);

std::string storeParamName(const ::testing::TestParamInfo<std::string>& info);

}  // namespace dlm::test
