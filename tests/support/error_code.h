// errorOf(fn): the DLMException `fn` throws; codeOf(fn): its ErrorCode. Both
// fail the test (and return INTERNAL_ERROR) when `fn` throws nothing.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "dlm/error.h"

namespace dlm::test {

inline DLMException errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DLMException& e) {
    return e;
  }
  ADD_FAILURE() << "no DLMException thrown";
  return DLMException(ErrorCode::INTERNAL_ERROR, "nothing thrown");
}

inline ErrorCode codeOf(const std::function<void()>& fn) {
  return errorOf(fn).code();
}

}  // namespace dlm::test
