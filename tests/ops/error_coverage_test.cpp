#include <gtest/gtest.h>

#include "support/coverage.h"

namespace strata::testing {
namespace {

TEST(Coverage, EveryOpHasAnErrorPathTest) {
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    auto it = op_coverage().find(op);
    if (it == op_coverage().end() || !it->second.count("errors")) missing += std::string(ops::op_name(op)) + " ";
  }
  EXPECT_TRUE(missing.empty()) << "ops without an error-path test: " << missing;
}

}  // namespace
}  // namespace strata::testing
