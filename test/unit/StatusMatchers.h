//===- StatusMatchers.h - GoogleTest helpers for runtime messages ---------===//
//
// The runtime's unit tests assert on Status messages; these two
// helpers keep those assertions alike across test files.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_UNIT_STATUSMATCHERS_H
#define ZPLAN_TEST_UNIT_STATUSMATCHERS_H

#include "runtime/plan/PlanLoader.h"

#include <gtest/gtest.h>

#include <string>

namespace zplan::testing {

/// Passes when `text` contains `expected`; prints both otherwise.
inline ::testing::AssertionResult contains(const std::string &text,
                                           const std::string &expected) {
  if (text.find(expected) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected \"" << expected << "\" in \"" << text << "\"";
}

/// The message of a failed status; "" (which contains no expected text)
/// when it succeeded.
inline std::string errorOf(const Status &status) {
  return status.ok() ? "" : status.message();
}

} // namespace zplan::testing

#endif // ZPLAN_TEST_UNIT_STATUSMATCHERS_H
