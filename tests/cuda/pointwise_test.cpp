// The formulas of ops/table/pointwise.def on the cuda backend against the reference (which
// computes them in double), forward and backward: f32 and f64 on contiguous, channels-last,
// transposed and large operands; f16 and bf16 against the reference in f32 on the same
// rounded inputs.
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "support/pointwise_rows.h"

namespace strata::testing {
namespace {

STRATA_COVERS(unary_fwd, "cuda_vs_reference");
STRATA_COVERS(unary_bwd, "cuda_vs_reference");
STRATA_COVERS(binary_fwd, "cuda_vs_reference");
STRATA_COVERS(binary_bwd, "cuda_vs_reference");

class CudaPointwise : public CudaTest {};

struct Case {
  Shape sizes;
  MemoryFormat fmt;
  bool transposed;
};
const Case kCases[] = {{{4, 3, 5, 7}, kNCHW, false}, {{2, 8, 5, 3}, kNHWC, false}, {{6, 9}, kNCHW, true},
                       {{1}, kNCHW, false},           {{100003}, kNCHW, false}};

Tensor operand(ops::PointwiseDomain dom, const Case& c, DType dt, uint64_t seed) {
  if (!c.transposed) return domain_tensor(dom, c.sizes, dt, seed, c.fmt);
  return domain_tensor(dom, {c.sizes[1], c.sizes[0]}, dt, seed).permute({1, 0});
}
// A device copy; a transposed operand stays transposed (its strides go to the kernel).
Tensor gpu_of(const Tensor& t) {
  if (t.is_contiguous() || t.is_channels_last()) return to_gpu(t);
  return to_gpu(t.permute({1, 0}).contiguous()).permute({1, 0});
}

// t in dtype dt (the reference computes f16/bf16 operands' rounded values in f32).
Tensor f32_or_f64(const Tensor& t, DType dt) {
  if (t.dtype() == dt) return t;
  Tensor o = Tensor::empty(t.sizes(), dt, Device::cpu(), format_of(t));
  copy_into(t, o);
  return o;
}

double tol_for(DType dt) {
  return dt == DType::f16 ? kTolF16 : dt == DType::bf16 ? kTolBf16 : kTolElementwise;
}

TEST_F(CudaPointwise, UnaryMatchesTheReference) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (const UnaryRow& r : unary_rows())
      for (const Case& c : kCases) {
        const DType ref_dt = dt == DType::f64 ? DType::f64 : DType::f32;
        const Tensor x = operand(domain_of(r.fn), c, dt, 5), dy = random_tensor(c.sizes, dt, 6);
        const Tensor xg = gpu_of(x), dyg = to_gpu(dy);
        const Tensor yg = gpu_nan(c.sizes, kNCHW, dt), dxg = gpu_nan(c.sizes, c.fmt, dt);
        const Tensor xr = f32_or_f64(x, ref_dt), dyr = f32_or_f64(dy, ref_dt);
        const Tensor yr = cpu_nan(c.sizes, kNCHW, ref_dt), dxr = cpu_nan(c.sizes, c.fmt, ref_dt);
        be().unary_fwd({xg, yg, r.fn, r.p0, r.p1});
        ref_.unary_fwd({xr, yr, r.fn, r.p0, r.p1});
        be().unary_bwd({xg, yg, dyg, dxg, r.fn, r.p0, r.p1});
        ref_.unary_bwd({xr, f32_or_f64(to_cpu(yg), ref_dt), dyr, dxr, r.fn, r.p0, r.p1});
        const std::string what =
            std::string(ops::unary_name(r.fn)) + " " + std::string(dtype_name(dt)) + " " + c.sizes.str();
        STRATA_EXPECT_CLOSE(f32_or_f64(to_cpu(yg), ref_dt), yr, tol_for(dt), what + " y");
        STRATA_EXPECT_CLOSE(f32_or_f64(to_cpu(dxg), ref_dt), dxr, tol_for(dt), what + " dx");
      }
}

TEST_F(CudaPointwise, BinaryMatchesTheReference) {
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (const BinaryRow& r : binary_rows())
      for (const Case& c : kCases) {
        const DType ref_dt = dt == DType::f64 ? DType::f64 : DType::f32;
        const Tensor a = operand(domain_of(r.fn), c, dt, 7), b = operand(domain_of(r.fn), c, dt, 8);
        const Tensor dy = random_tensor(c.sizes, dt, 9);
        const Tensor ag = gpu_of(a), bg = gpu_of(b), dyg = to_gpu(dy), yg = gpu_nan(c.sizes, kNCHW, dt);
        const Tensor dag = gpu_nan(c.sizes, kNCHW, dt), dbg = gpu_nan(c.sizes, c.fmt, dt);
        const Tensor ar = f32_or_f64(a, ref_dt), br = f32_or_f64(b, ref_dt), dyr = f32_or_f64(dy, ref_dt);
        const Tensor yr = cpu_nan(c.sizes, kNCHW, ref_dt), dar = cpu_nan(c.sizes, kNCHW, ref_dt),
                     dbr = cpu_nan(c.sizes, c.fmt, ref_dt);
        be().binary_fwd({ag, bg, yg, r.fn});
        ref_.binary_fwd({ar, br, yr, r.fn});
        be().binary_bwd({ag, bg, yg, dyg, dag, dbg, r.fn});
        ref_.binary_bwd({ar, br, f32_or_f64(to_cpu(yg), ref_dt), dyr, dar, dbr, r.fn});
        const std::string what =
            std::string(ops::binary_name(r.fn)) + " " + std::string(dtype_name(dt)) + " " + c.sizes.str();
        STRATA_EXPECT_CLOSE(f32_or_f64(to_cpu(yg), ref_dt), yr, tol_for(dt), what + " y");
        STRATA_EXPECT_CLOSE(f32_or_f64(to_cpu(dag), ref_dt), dar, tol_for(dt), what + " da");
        STRATA_EXPECT_CLOSE(f32_or_f64(to_cpu(dbg), ref_dt), dbr, tol_for(dt), what + " db");
      }
}

}  // namespace
}  // namespace strata::testing
