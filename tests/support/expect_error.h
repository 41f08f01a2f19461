#pragma once
// EXPECT_STRATA_ERROR(stmt, "part", ...): stmt throws strata::Error whose message
// contains every part.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "strata/core/error.h"

namespace strata::testing {
inline ::testing::AssertionResult message_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts)
    if (msg.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "error message \"" << msg << "\" lacks \"" << p << "\"";
  return ::testing::AssertionSuccess();
}
}  // namespace strata::testing

#define EXPECT_STRATA_ERROR(stmt, ...)                                                       \
  do {                                                                                       \
    bool strata_thrown = false;                                                              \
    try {                                                                                    \
      stmt;                                                                                  \
    } catch (const ::strata::Error& e) {                                                     \
      strata_thrown = true;                                                                  \
      EXPECT_TRUE(::strata::testing::message_contains(e.what(), {__VA_ARGS__})) << #stmt;    \
    }                                                                                        \
    EXPECT_TRUE(strata_thrown) << #stmt << " did not throw strata::Error";                   \
  } while (0)
