// Every op of op_table.def must be checked by some test of this executable
// (registered with STRATA_COVERS), and the reference backend must run every op
// in f32 and f64: it is the oracle the other backends are compared with.
#include "support/coverage.h"

#include <gtest/gtest.h>

#include <string>

#include "strata/backends/reference/reference_backend.h"

namespace strata::testing {
namespace {

static_assert(backends::BackendImpl<backends::ReferenceBackend>,
              "ReferenceBackend must implement every op of op_table.def");

TEST(ReferenceCoverage, EveryOpHasACheck) {
  std::string missing;
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    const auto it = op_coverage().find(op);
    if (it == op_coverage().end() || it->second.empty()) {
      missing += ' ';
      missing += ops::op_name(op);
    }
  }
  EXPECT_TRUE(missing.empty()) << "ops without a reference-backend test:" << missing;
}

TEST(ReferenceCoverage, SupportsEveryOpInF32AndF64) {
  const backends::ReferenceBackend ref{};
  for (int i = 0; i < ops::kNumOps; ++i) {
    const auto op = static_cast<ops::OpId>(i);
    EXPECT_TRUE(ref.capabilities().supports(op, DType::f32)) << ops::op_name(op);
    EXPECT_TRUE(ref.capabilities().supports(op, DType::f64)) << ops::op_name(op);
  }
}

}  // namespace
}  // namespace strata::testing
