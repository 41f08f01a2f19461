// The formulas of ops/table/pointwise.def on each production CPU backend against the reference
// backend (which computes them in double), forward and backward, f32 and f64, on contiguous,
// channels-last and transposed operands, batch 1 and empty.
#include <gtest/gtest.h>

#include "cpu_backend_test_util.h"
#include "support/coverage.h"
#include "support/pointwise_rows.h"

namespace strata::testing {
namespace {

STRATA_COVERS(unary_fwd, "vs_reference");
STRATA_COVERS(unary_bwd, "vs_reference");
STRATA_COVERS(binary_fwd, "vs_reference");
STRATA_COVERS(binary_bwd, "vs_reference");

class CpuPointwise : public CpuBackendTest {};

struct Case {
  Shape sizes;
  MemoryFormat fmt;
  bool transposed;
};
const Case kCases[] = {{{4, 3, 5, 7}, kNCHW, false}, {{2, 3, 4, 5}, kNHWC, false}, {{6, 9}, kNCHW, true},
                       {{1, 1}, kNCHW, false},        {{0, 4}, kNCHW, false}};

Tensor operand(ops::PointwiseDomain dom, const Case& c, DType dt, uint64_t seed) {
  if (!c.transposed) return domain_tensor(dom, c.sizes, dt, seed, c.fmt);
  return domain_tensor(dom, {c.sizes[1], c.sizes[0]}, dt, seed).permute({1, 0});
}

TEST_P(CpuPointwise, UnaryForwardAndBackwardMatchTheReference) {
  for (DType dt : {DType::f32, DType::f64})
    for (const UnaryRow& r : unary_rows())
      for (const Case& c : kCases) {
        const Tensor x = operand(domain_of(r.fn), c, dt, 5), dy = random_tensor(c.sizes, dt, 6);
        const Tensor y = nan_tensor(c.sizes, kNCHW, dt), y_ref = nan_tensor(c.sizes, kNCHW, dt);
        const Tensor dx = nan_tensor(c.sizes, c.fmt, dt), dx_ref = nan_tensor(c.sizes, c.fmt, dt);
        be().unary_fwd({x, y, r.fn, r.p0, r.p1});
        ref_.unary_fwd({x, y_ref, r.fn, r.p0, r.p1});
        be().unary_bwd({x, y_ref, dy, dx, r.fn, r.p0, r.p1});
        ref_.unary_bwd({x, y_ref, dy, dx_ref, r.fn, r.p0, r.p1});
        const std::string what =
            std::string(ops::unary_name(r.fn)) + " " + std::string(dtype_name(dt)) + " " + c.sizes.str();
        STRATA_EXPECT_CLOSE(y, y_ref, kTolElementwise, what + " y");
        STRATA_EXPECT_CLOSE(dx, dx_ref, kTolElementwise, what + " dx");
      }
}

TEST_P(CpuPointwise, BinaryForwardAndBackwardMatchTheReference) {
  for (DType dt : {DType::f32, DType::f64})
    for (const BinaryRow& r : binary_rows())
      for (const Case& c : kCases) {
        const Tensor a = operand(domain_of(r.fn), c, dt, 7), b = operand(domain_of(r.fn), c, dt, 8);
        const Tensor dy = random_tensor(c.sizes, dt, 9);
        const Tensor y = nan_tensor(c.sizes, kNCHW, dt), y_ref = nan_tensor(c.sizes, kNCHW, dt);
        const Tensor da = nan_tensor(c.sizes, kNCHW, dt), da_ref = nan_tensor(c.sizes, kNCHW, dt);
        const Tensor db = nan_tensor(c.sizes, c.fmt, dt), db_ref = nan_tensor(c.sizes, c.fmt, dt);
        be().binary_fwd({a, b, y, r.fn});
        ref_.binary_fwd({a, b, y_ref, r.fn});
        be().binary_bwd({a, b, y_ref, dy, da, db, r.fn});
        ref_.binary_bwd({a, b, y_ref, dy, da_ref, db_ref, r.fn});
        const std::string what =
            std::string(ops::binary_name(r.fn)) + " " + std::string(dtype_name(dt)) + " " + c.sizes.str();
        STRATA_EXPECT_CLOSE(y, y_ref, kTolElementwise, what + " y");
        STRATA_EXPECT_CLOSE(da, da_ref, kTolElementwise, what + " da");
        STRATA_EXPECT_CLOSE(db, db_ref, kTolElementwise, what + " db");
      }
}

STRATA_CPU_BACKEND_SUITE(CpuPointwise);

}  // namespace
}  // namespace strata::testing
