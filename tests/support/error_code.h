// codeOf(fn): the ErrorCode of the DLMException `fn` throws; a test failure
// (and INTERNAL_ERROR) when it throws nothing.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "dlm/error.h"

namespace dlm::test {

inline ErrorCode codeOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const DLMException& e) {
    return e.code();
  }
  ADD_FAILURE() << "no DLMException";
  return ErrorCode::INTERNAL_ERROR;
}

}  // namespace dlm::test
