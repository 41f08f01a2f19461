// batch norm, relu and linear on the cuda backend against the reference, forward and
// backward, NCHW and NHWC (pooling and space_to_depth: pool_test.cpp; linear's epilogues and prologue:
// linear_epilogue_test.cpp).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_util.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::testing {
namespace {

STRATA_COVERS(batch_norm_fwd, "cuda_vs_reference");
STRATA_COVERS(batch_norm_bwd, "cuda_vs_reference");
STRATA_COVERS(relu_fwd, "cuda_vs_reference");
STRATA_COVERS(relu_bwd, "cuda_vs_reference");
STRATA_COVERS(linear_fwd, "cuda_vs_reference");
STRATA_COVERS(linear_bwd_data, "cuda_vs_reference");
STRATA_COVERS(linear_bwd_weight, "cuda_vs_reference");

class CudaNormPoolLinear : public CudaTest {};

// ---- batch norm -------------------------------------------------------------------

void check_bn(CudaBackend& be, ReferenceBackend& ref, const Shape& xs, MemoryFormat fmt, bool training,
              uint64_t seed, double lo = -2.0, double hi = 3.0) {
  SCOPED_TRACE(std::string(training ? "train " : "eval ") + xs.str() + (fmt == kNHWC ? " nhwc" : " nchw") +
               " in [" + std::to_string(lo) + "," + std::to_string(hi) + ")");
  const int64_t c = xs[1];
  const Pair x = rand_pair(xs, seed, fmt, lo, hi);
  const Pair gamma = rand_pair({c}, seed + 1, kNCHW, 0.5, 1.5), beta = rand_pair({c}, seed + 2);
  Pair rm = rand_pair({c}, seed + 3, kNCHW, -0.5, 0.5), rv = rand_pair({c}, seed + 4, kNCHW, 0.5, 2.0);
  const Pair y = nan_pair(xs, fmt), sm = nan_pair({c}), si = nan_pair({c});
  ops::BatchNormFwdArgs g{x.gpu, gamma.gpu, beta.gpu, rm.gpu, rv.gpu, y.gpu, sm.gpu, si.gpu, 1e-5, 0.1, training};
  ops::BatchNormFwdArgs r{x.cpu, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, y.cpu, sm.cpu, si.cpu, 1e-5, 0.1, training};
  be.batch_norm_fwd(g);
  ref.batch_norm_fwd(r);
  STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "batch_norm_fwd y");
  STRATA_EXPECT_CLOSE(sm.gpu, sm.cpu, kTolReduction, "save_mean");
  STRATA_EXPECT_CLOSE(si.gpu, si.cpu, kTolReduction, "save_invstd");
  // Running statistics: updated in training (unbiased variance), untouched in eval.
  STRATA_EXPECT_CLOSE(rm.gpu, rm.cpu, kTolReduction, "running_mean");
  STRATA_EXPECT_CLOSE(rv.gpu, rv.cpu, kTolReduction, "running_var");

  const Pair dy = rand_pair(xs, seed + 5, fmt);
  const Pair dx = nan_pair(xs, fmt), dg = nan_pair({c}), db = nan_pair({c});
  // Both backends start backward from the same saved statistics (the reference's).
  const Tensor sm_g = to_gpu(sm.cpu), si_g = to_gpu(si.cpu);
  be.batch_norm_bwd({x.gpu, dy.gpu, gamma.gpu, sm_g, si_g, dx.gpu, dg.gpu, db.gpu, training});
  ref.batch_norm_bwd({x.cpu, dy.cpu, gamma.cpu, sm.cpu, si.cpu, dx.cpu, dg.cpu, db.cpu, training});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "batch_norm_bwd dx");
  STRATA_EXPECT_CLOSE(dg.gpu, dg.cpu, kTolReduction, "batch_norm_bwd dgamma");
  STRATA_EXPECT_CLOSE(db.gpu, db.cpu, kTolReduction, "batch_norm_bwd dbeta");
}

TEST_F(CudaNormPoolLinear, BatchNorm) {
  uint64_t seed = 1000;
  for (bool training : {true, false}) {
    check_bn(be(), ref_, {2, 3, 5, 7}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {1, 8, 4, 4}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {4, 16, 7, 5}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {8, 64, 14, 14}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {8, 64, 14, 14}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {16, 10}, kNCHW, training, seed += 10);  // BatchNorm1d shape
  }
}

// Channels-last f32 on strata's own kernels (the default): channel counts that take
// 16-byte vectors and ones that do not, batch 1, planes of 1x1, many rows per split.
TEST_F(CudaNormPoolLinear, BatchNormChannelsLastOwnKernels) {
  uint64_t seed = 1030;
  for (bool training : {true, false}) {
    check_bn(be(), ref_, {1, 64, 7, 7}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {3, 13, 5, 3}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {2, 6, 9, 1}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {16, 96, 1, 1}, kNHWC, training, seed += 10);
    check_bn(be(), ref_, {64, 256, 16, 16}, kNHWC, training, seed += 10);
    // A mean 1000x the standard deviation: the variance must not cancel away.
    check_bn(be(), ref_, {8, 32, 9, 9}, kNHWC, training, seed += 10, 999.0, 1001.0);
  }
  // The same kernels on NCHW f32 (Settings::own_nchw_batch_norm, for A/B timing), and
  // [N,C] input.
  be().set_own_nchw_batch_norm(true);
  for (bool training : {true, false}) {
    check_bn(be(), ref_, {2, 3, 5, 7}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {1, 8, 4, 4}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {8, 64, 14, 14}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {16, 10}, kNCHW, training, seed += 10);
    check_bn(be(), ref_, {8, 32, 9, 9}, kNCHW, training, seed += 10, 999.0, 1001.0);
  }
}

// Channels-last training through cuDNN (Settings::cudnn_nhwc_batch_norm) in both
// modes: SPATIAL_PERSISTENT and plain SPATIAL.
TEST_F(CudaNormPoolLinear, BatchNormChannelsLastModes) {
  uint64_t seed = 1050;
  be().set_cudnn_nhwc_batch_norm(true);
  for (bool persistent : {true, false}) {
    SCOPED_TRACE(persistent ? "persistent" : "spatial");
    be().set_persistent_batch_norm(persistent);
    check_bn(be(), ref_, {4, 16, 7, 5}, kNHWC, true, seed += 10);
    check_bn(be(), ref_, {32, 64, 28, 28}, kNHWC, true, seed += 10);
    check_bn(be(), ref_, {2, 3, 5, 7}, kNHWC, true, seed += 10);
  }
}

// f16/bf16 activations with f32 parameters and statistics (mixed precision), on
// strata's kernels in every layout, against the reference on the same (rounded) input
// values in f32: statistics, running statistics and parameter gradients to f32
// accuracy, y and dx to the half type's rounding. A channel slice makes the input a
// strided view. Two runs give the same bits.
void check_half_bn(CudaBackend& be, ReferenceBackend& ref, DType dt, const Shape& xs, MemoryFormat fmt,
                   bool training, bool slice, uint64_t seed) {
  SCOPED_TRACE(std::string(dtype_name(dt)) + (training ? " train " : " eval ") + xs.str() +
               (fmt == kNHWC ? " nhwc" : " nchw") + (slice ? " slice" : ""));
  const int64_t c = xs[1];
  const double tol = dt == DType::bf16 ? kTolBf16 : kTolF16;
  Shape big = xs;
  if (slice) big[1] += 3;
  Tensor xh = random_tensor(big, dt, seed, -2.0, 3.0, fmt), dyh = random_tensor(big, dt, seed + 5, -1.0, 1.0, fmt);
  if (slice) xh = xh.narrow(1, 1, c), dyh = dyh.narrow(1, 1, c);
  const Tensor x = f32_of(xh), dy = f32_of(dyh);
  const Pair gamma = rand_pair({c}, seed + 1, kNCHW, 0.5, 1.5), beta = rand_pair({c}, seed + 2);
  Pair rm = rand_pair({c}, seed + 3, kNCHW, -0.5, 0.5), rv = rand_pair({c}, seed + 4, kNCHW, 0.5, 2.0);
  const Tensor rm0 = to_gpu(rm.cpu), rv0 = to_gpu(rv.cpu);
  const Tensor y_ref = cpu_nan(xs, fmt), sm_ref = cpu_nan({c}), si_ref = cpu_nan({c});
  ref.batch_norm_fwd({x, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, y_ref, sm_ref, si_ref, 1e-5, 0.1, training});
  const Tensor xg = to_gpu(xh), dyg = to_gpu(dyh);
  Tensor first;
  for (int run = 0; run < 2; ++run) {
    const Tensor y = gpu_nan(xs, fmt, dt), sm = gpu_nan({c}), si = gpu_nan({c});
    copy_into(rm0, rm.gpu);
    copy_into(rv0, rv.gpu);
    be.batch_norm_fwd({xg, gamma.gpu, beta.gpu, rm.gpu, rv.gpu, y, sm, si, 1e-5, 0.1, training});
    STRATA_EXPECT_CLOSE(y, y_ref, tol, "batch_norm_fwd y");
    STRATA_EXPECT_CLOSE(sm, sm_ref, kTolReduction, "save_mean");
    STRATA_EXPECT_CLOSE(si, si_ref, kTolReduction, "save_invstd");
    STRATA_EXPECT_CLOSE(rm.gpu, rm.cpu, kTolReduction, "running_mean");
    STRATA_EXPECT_CLOSE(rv.gpu, rv.cpu, kTolReduction, "running_var");
    if (run == 0)
      first = to_cpu(y);
    else
      EXPECT_TRUE(bitwise_equal(to_cpu(y), first)) << "batch_norm_fwd is not deterministic";
  }
  const Tensor dx = gpu_nan(xs, fmt, dt), dg = gpu_nan({c}), db = gpu_nan({c});
  const Tensor dx_ref = cpu_nan(xs, fmt), dg_ref = cpu_nan({c}), db_ref = cpu_nan({c});
  be.batch_norm_bwd({xg, dyg, gamma.gpu, to_gpu(sm_ref), to_gpu(si_ref), dx, dg, db, training});
  ref.batch_norm_bwd({x, dy, gamma.cpu, sm_ref, si_ref, dx_ref, dg_ref, db_ref, training});
  STRATA_EXPECT_CLOSE(dx, dx_ref, tol, "batch_norm_bwd dx");
  STRATA_EXPECT_CLOSE(dg, dg_ref, kTolReduction, "batch_norm_bwd dgamma");
  STRATA_EXPECT_CLOSE(db, db_ref, kTolReduction, "batch_norm_bwd dbeta");
}

TEST_F(CudaNormPoolLinear, BatchNormHalf) {
  uint64_t seed = 1070;
  for (DType dt : {DType::bf16, DType::f16}) {
    ASSERT_TRUE(be().capabilities().supports(ops::OpId::batch_norm_fwd, dt));
    ASSERT_TRUE(be().capabilities().supports(ops::OpId::batch_norm_bwd, dt));
    for (bool training : {true, false}) {
      check_half_bn(be(), ref_, dt, {4, 64, 7, 5}, kNHWC, training, false, seed += 10);
      check_half_bn(be(), ref_, dt, {1, 24, 6, 6}, kNHWC, training, false, seed += 10);
      check_half_bn(be(), ref_, dt, {3, 5, 7, 3}, kNHWC, training, false, seed += 10);
      check_half_bn(be(), ref_, dt, {2, 16, 5, 5}, kNHWC, training, true, seed += 10);
      check_half_bn(be(), ref_, dt, {2, 8, 6, 6}, kNCHW, training, false, seed += 10);
      check_half_bn(be(), ref_, dt, {3, 6, 5, 7}, kNCHW, training, true, seed += 10);
      check_half_bn(be(), ref_, dt, {16, 40}, kNCHW, training, false, seed += 10);
    }
  }
  check_half_bn(be(), ref_, DType::bf16, {32, 128, 28, 28}, kNHWC, true, false, seed += 10);
}

// Fused evaluation (op_args.h): y = relu?(bn(x) + z) in one call, against the reference's
// fused form (bitwise its separate ops, tests/cpu_backends); bf16 within its rounding.
TEST_F(CudaNormPoolLinear, BatchNormFusedEvaluation) {
  uint64_t seed = 1150;
  // 10 channels: the element-wise kernels; 16 channels-last: the 16-byte vector kernel.
  for (const Shape& s : {Shape{3, 10, 6, 5}, Shape{2, 16, 3, 5}})
  for (DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat fmt : {kNCHW, kNHWC})
      for (int variant = 0; variant < 3; ++variant) {
        const bool with_z = variant != 1, relu = variant != 2;
        SCOPED_TRACE(::testing::Message() << s.str() << " " << dtype_name(dt) << (fmt == kNHWC ? " nhwc" : " nchw")
                                          << (with_z ? " +z" : "") << (relu ? " relu" : ""));
        const int64_t ch = s[1];
        const Tensor xh = random_tensor(s, dt, seed += 10, -2.0, 2.0, fmt);
        const Tensor zh = random_tensor(s, dt, seed + 1, -1.0, 1.0, fmt);
        const Pair gamma = rand_pair({ch}, seed + 2, kNCHW, 0.5, 1.5), beta = rand_pair({ch}, seed + 3);
        const Pair rm = rand_pair({ch}, seed + 4, kNCHW, -0.5, 0.5), rv = rand_pair({ch}, seed + 5, kNCHW, 0.5, 2.0);
        const Tensor xr = f32_of(xh), zr = f32_of(zh), y_ref = cpu_nan(s, fmt);
        ops::BatchNormFwdArgs r{xr, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, y_ref, {}, {}};
        r.training = false;
        if (with_z) r.z = zr;
        r.relu = relu;
        ref_.batch_norm_fwd(r);
        const Tensor xg = to_gpu(xh), zg = to_gpu(zh), y = gpu_nan(s, fmt, dt);
        ops::BatchNormFwdArgs g{xg, gamma.gpu, beta.gpu, rm.gpu, rv.gpu, y, {}, {}};
        g.training = false;
        if (with_z) g.z = zg;
        g.relu = relu;
        be().batch_norm_fwd(g);
        STRATA_EXPECT_CLOSE(f32_of(to_cpu(y)), y_ref, dt == DType::bf16 ? kTolBf16 : kTolReduction,
                            "batch_norm_fwd fused");
      }
}

// Fused training (op_args.h): y = relu?(bn(x) + z) with its ReLU mask, then the backward
// through the mask with dz, against the reference's fused forms (bitwise its separate
// ops, tests/cpu_backends) on the same input values. The mask must be the GPU's own
// y > 0 bit for bit, dz the masked dy exactly. Shapes for every path: channels-last with
// C % 8 == 0 (the apply pass writes the mask in bf16; f32 takes a second pass), C = 10
// (element-wise), NCHW with planes of 64 (vectors) and of 36, odd counts (a partial last
// mask byte), batch 1; f32 NCHW runs on cuDNN with the strata epilogue and masking.
TEST_F(CudaNormPoolLinear, BatchNormFusedTraining) {
  uint64_t seed = 1170;
  for (const auto& [s, fmt] : {std::pair{Shape{4, 16, 7, 5}, kNHWC}, std::pair{Shape{3, 10, 6, 5}, kNHWC},
                               std::pair{Shape{2, 16, 8, 8}, kNCHW}, std::pair{Shape{2, 8, 6, 6}, kNCHW},
                               std::pair{Shape{1, 3, 5, 3}, kNHWC}, std::pair{Shape{1, 24, 3, 3}, kNCHW}})
    for (DType dt : {DType::f32, DType::bf16})
      for (int variant = 0; variant < 3; ++variant) {
        const bool with_z = variant != 1, relu = variant != 2;
        SCOPED_TRACE(::testing::Message() << s.str() << " " << dtype_name(dt) << (fmt == kNHWC ? " nhwc" : " nchw")
                                          << (with_z ? " +z" : "") << (relu ? " relu" : ""));
        const int64_t ch = s[1];
        const double tol = dt == DType::bf16 ? kTolBf16 : kTolReduction;
        const Tensor xh = random_tensor(s, dt, seed += 10, -2.0, 2.0, fmt);
        const Tensor zh = random_tensor(s, dt, seed + 1, -1.0, 1.0, fmt);
        const Tensor dyh = random_tensor(s, dt, seed + 2, -1.0, 1.0, fmt);
        const Pair gamma = rand_pair({ch}, seed + 3, kNCHW, 0.5, 1.5), beta = rand_pair({ch}, seed + 4);
        Pair rm = rand_pair({ch}, seed + 5, kNCHW, -0.5, 0.5), rv = rand_pair({ch}, seed + 6, kNCHW, 0.5, 2.0);
        const int64_t bytes = ops::relu_mask_bytes(s.numel());
        // The reference on the f32 values of the inputs.
        const Tensor xr = f32_of(xh), zr = f32_of(zh), dyr = f32_of(dyh), y_ref = cpu_nan(s, fmt);
        const Tensor sm_ref = cpu_nan({ch}), si_ref = cpu_nan({ch}), mask_ref = Tensor::empty(Shape{bytes}, DType::u8);
        ops::BatchNormFwdArgs r{xr, gamma.cpu, beta.cpu, rm.cpu, rv.cpu, y_ref, sm_ref, si_ref};
        if (with_z) r.z = zr;
        r.relu = relu;
        if (relu) r.relu_mask = mask_ref;
        ref_.batch_norm_fwd(r);
        const Tensor xg = to_gpu(xh), zg = to_gpu(zh), dyg = to_gpu(dyh), y = gpu_nan(s, fmt, dt);
        const Tensor sm = gpu_nan({ch}), si = gpu_nan({ch});
        const Tensor mask = Tensor::empty(Shape{bytes}, DType::u8, Device::cuda());
        ops::BatchNormFwdArgs g{xg, gamma.gpu, beta.gpu, rm.gpu, rv.gpu, y, sm, si};
        if (with_z) g.z = zg;
        g.relu = relu;
        if (relu) g.relu_mask = mask;
        be().batch_norm_fwd(g);
        const Tensor y_cpu = f32_of(to_cpu(y));
        STRATA_EXPECT_CLOSE(y_cpu, y_ref, tol, "batch_norm_fwd fused y");
        STRATA_EXPECT_CLOSE(sm, sm_ref, kTolReduction, "save_mean");
        STRATA_EXPECT_CLOSE(si, si_ref, kTolReduction, "save_invstd");
        STRATA_EXPECT_CLOSE(rm.gpu, rm.cpu, kTolReduction, "running_mean");
        STRATA_EXPECT_CLOSE(rv.gpu, rv.cpu, kTolReduction, "running_var");
        if (!relu) continue;  // without a ReLU the backward is the plain one (dz = dy)
        const Tensor mask_cpu = to_cpu(mask);
        for (int64_t i = 0; i < s.numel(); ++i)  // offset i of y's storage
          ASSERT_EQ(ops::relu_mask_bit(mask_cpu.data<uint8_t>(), i), y_cpu.data<float>()[i] > 0.f) << "mask bit " << i;
        // Backward from the GPU's mask and the reference's statistics on both.
        const Tensor dx = gpu_nan(s, fmt, dt), dz = gpu_nan(s, fmt, dt), dg = gpu_nan({ch}), db = gpu_nan({ch});
        const Tensor dx_ref = cpu_nan(s, fmt), dz_ref = cpu_nan(s, fmt), dg_ref = cpu_nan({ch}), db_ref = cpu_nan({ch});
        const Tensor sm_g = to_gpu(sm_ref), si_g = to_gpu(si_ref);  // alive while the views are
        ops::BatchNormBwdArgs gb{xg, dyg, gamma.gpu, sm_g, si_g, dx, dg, db};
        gb.relu_mask = mask;
        if (with_z) gb.dz = dz;
        be().batch_norm_bwd(gb);
        ops::BatchNormBwdArgs rb{xr, dyr, gamma.cpu, sm_ref, si_ref, dx_ref, dg_ref, db_ref};
        rb.relu_mask = mask_cpu;
        if (with_z) rb.dz = dz_ref;
        ref_.batch_norm_bwd(rb);
        STRATA_EXPECT_CLOSE(f32_of(to_cpu(dx)), dx_ref, tol, "batch_norm_bwd fused dx");
        STRATA_EXPECT_CLOSE(dg, dg_ref, kTolReduction, "batch_norm_bwd fused dgamma");
        STRATA_EXPECT_CLOSE(db, db_ref, kTolReduction, "batch_norm_bwd fused dbeta");
        if (with_z) {
          EXPECT_TRUE(bitwise_equal(f32_of(to_cpu(dz)), dz_ref)) << "dz is the masked dy";
        }
      }
}

// Without affine parameters and without running statistics (track_running_stats=False).
TEST_F(CudaNormPoolLinear, BatchNormOptionalArguments) {
  const Shape xs{4, 6, 5, 5};
  const Pair x = rand_pair(xs, 1100);
  const Pair y = nan_pair(xs), sm = nan_pair({6}), si = nan_pair({6});
  be().batch_norm_fwd({x.gpu, {}, {}, {}, {}, y.gpu, sm.gpu, si.gpu, 1e-5, 0.1, true});
  ref_.batch_norm_fwd({x.cpu, {}, {}, {}, {}, y.cpu, sm.cpu, si.cpu, 1e-5, 0.1, true});
  STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "batch_norm_fwd no affine");
  const Pair dy = rand_pair(xs, 1101), dx = nan_pair(xs);
  be().batch_norm_bwd({x.gpu, dy.gpu, {}, to_gpu(sm.cpu), to_gpu(si.cpu), dx.gpu, {}, {}, true});
  ref_.batch_norm_bwd({x.cpu, dy.cpu, {}, sm.cpu, si.cpu, dx.cpu, {}, {}, true});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "batch_norm_bwd no affine");
}

// ---- relu -------------------------------------------------------------------------

TEST_F(CudaNormPoolLinear, Relu) {
  struct Case {
    Shape s;
    MemoryFormat fmt;
  };
  // Rank 4 goes through cuDNN, rank 2 and 1 through strata's own kernel.
  for (const Case& c : std::vector<Case>{{{2, 3, 5, 7}, kNCHW}, {{2, 8, 5, 3}, kNHWC}, {{7, 13}, kNCHW}, {{31}, kNCHW}}) {
    SCOPED_TRACE(c.s.str());
    const Pair x = rand_pair(c.s, 1200, c.fmt);
    const Pair y = nan_pair(c.s, c.fmt);
    be().relu_fwd({x.gpu, y.gpu});
    ref_.relu_fwd({x.cpu, y.cpu});
    EXPECT_TRUE(bitwise_equal(to_cpu(y.gpu), y.cpu));
    const Pair dy = rand_pair(c.s, 1201, c.fmt), dx = nan_pair(c.s, c.fmt);
    be().relu_bwd({y.gpu, dy.gpu, dx.gpu});
    ref_.relu_bwd({y.cpu, dy.cpu, dx.cpu});
    EXPECT_TRUE(bitwise_equal(to_cpu(dx.gpu), dx.cpu));
  }
  // Strided views (own kernel) and bf16 (own kernel, rank 4).
  const Pair x = rand_slice_pair({2, 4, 3, 3}, 1202), y = nan_pair({2, 4, 3, 3}, kNCHW, true);
  be().relu_fwd({x.gpu, y.gpu});
  ref_.relu_fwd({x.cpu, y.cpu});
  EXPECT_TRUE(close(y.gpu, y.cpu, 0.0));
  const Tensor xb = random_tensor({2, 4, 3, 3}, DType::bf16, 1203);
  const Tensor yb = gpu_nan({2, 4, 3, 3}, kNCHW, DType::bf16);
  be().relu_fwd({to_gpu(xb), yb});
  const auto xv = xb.to_vector<double>(), yv = to_cpu(yb).to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(yv[i], xv[i] > 0 ? xv[i] : 0.0) << i;
}

// ---- linear -----------------------------------------------------------------------

void check_linear(CudaBackend& be, ReferenceBackend& ref, int64_t n, int64_t in, int64_t out, bool bias,
                  bool transposed_w, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "linear N" << n << " in" << in << " out" << out << (bias ? " bias" : "")
                                    << (transposed_w ? " w^T view" : ""));
  const Pair x = rand_pair({n, in}, seed);
  Pair w;
  if (transposed_w) {  // w [out,in] as a transposed view of a [in,out] tensor (column-major)
    const Pair wt = rand_pair({in, out}, seed + 1);
    w = {wt.cpu.permute({1, 0}), wt.gpu.permute({1, 0})};
  } else {
    w = rand_pair({out, in}, seed + 1);
  }
  const Pair b = bias ? rand_pair({out}, seed + 2) : Pair{};
  const Pair y = nan_pair({n, out});
  be.linear_fwd({x.gpu, w.gpu, b.gpu, y.gpu});
  ref.linear_fwd({x.cpu, w.cpu, b.cpu, y.cpu});
  STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolGemm, "linear_fwd");
  const Pair dy = rand_pair({n, out}, seed + 3);
  const Pair dx = nan_pair({n, in});
  be.linear_bwd_data({dy.gpu, w.gpu, dx.gpu});
  ref.linear_bwd_data({dy.cpu, w.cpu, dx.cpu});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolGemm, "linear_bwd_data");
  const Pair dw = nan_pair({out, in}), db = bias ? nan_pair({out}) : Pair{};
  be.linear_bwd_weight({x.gpu, dy.gpu, dw.gpu, db.gpu});
  ref.linear_bwd_weight({x.cpu, dy.cpu, dw.cpu, db.cpu});
  STRATA_EXPECT_CLOSE(dw.gpu, dw.cpu, kTolGemm, "linear_bwd_weight");
  if (bias) {
    STRATA_EXPECT_CLOSE(db.gpu, db.cpu, kTolReduction, "linear_bwd_weight db");
  }
}

TEST_F(CudaNormPoolLinear, Linear) {
  check_linear(be(), ref_, 1, 7, 5, true, false, 1600);
  check_linear(be(), ref_, 8, 84, 10, true, false, 1610);       // LeNet's last layer
  check_linear(be(), ref_, 32, 2048, 1000, true, false, 1620);  // ResNet-50's fc
  check_linear(be(), ref_, 5, 33, 17, false, false, 1630);
  check_linear(be(), ref_, 6, 12, 9, true, true, 1640);
  check_linear(be(), ref_, 1, 1, 1, true, false, 1650);
}

// Up to kGemvMaxRows rows run on the few-rows kernel (gemv.h): 16-byte loads where the rows allow
// them (K 768), one element at a time where they do not (K 33, and x a narrowed view whose rows
// start off alignment), any output strides; five rows and more stay on cuBLAS.
TEST_F(CudaNormPoolLinear, LinearFewRows) {
  uint64_t seed = 1900;
  for (int64_t n : {1, 2, 3, 4, 5})
    for (int64_t in : {768, 33, 8})
      for (int64_t out : {1, 37, 2304}) {
        const uint64_t s = seed++;
        check_linear(be(), ref_, n, in, out, (s & 1) == 0, false, s);
      }
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t n : {1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(n));
      const Tensor x = random_tensor({n, 768}, dt, seed++), w = random_tensor({2304, 768}, dt, seed++);
      const Tensor b = random_tensor({2304}, dt, seed++);
      const Tensor y = gpu_nan({n, 2304}, kNCHW, dt), y_ref = cpu_nan({n, 2304});
      be().linear_fwd({to_gpu(x), to_gpu(w), to_gpu(b), y});
      ref_.linear_fwd({host_as(x, DType::f32), host_as(w, DType::f32), host_as(b, DType::f32), y_ref});
      STRATA_EXPECT_CLOSE(y, y_ref, dt == DType::f16 ? kTolF16 : kTolBf16, "linear_fwd few rows, half");
      const Tensor again = gpu_nan({n, 2304}, kNCHW, dt);
      be().linear_fwd({to_gpu(x), to_gpu(w), to_gpu(b), again});
      EXPECT_TRUE(bitwise_equal(host_as(again, DType::f32), host_as(y, DType::f32))) << "a second call differs";
    }
  // x's rows 1 element past a 16-byte boundary, y written through a transposed view.
  const Pair wide = rand_pair({3, 65}, seed++), w = rand_pair({40, 64}, seed++), b = rand_pair({40}, seed++);
  const Pair x{wide.cpu.narrow(1, 1, 64), wide.gpu.narrow(1, 1, 64)};
  const Pair yt = nan_pair({40, 3});
  const Tensor yg = yt.gpu.permute({1, 0}), yc = yt.cpu.permute({1, 0});
  be().linear_fwd({x.gpu, w.gpu, b.gpu, yg});
  ref_.linear_fwd({x.cpu, w.cpu, b.cpu, yc});
  STRATA_EXPECT_CLOSE(yg, yc, kTolGemm, "linear_fwd few rows, unaligned x, transposed y");
}

// linear's bias gradient, the sum of dy over its rows (reduce.cu's column_sums, in double): the
// exact sum rounded once to the dtype (checked against a host sum in double within one rounding),
// the same bits on a second call, and the same bits from the same values in rows one element past
// a 16-byte boundary (the kernel reads those an element at a time, in the same order).
TEST_F(CudaNormPoolLinear, LinearBiasGradient) {
  struct Case {
    int64_t rows, cols, pad;  // dy [rows, cols] with rows cols + pad elements apart
    DType dt;
  };
  uint64_t seed = 1950;
  for (const Case& k : std::vector<Case>{{16384, 768, 0, DType::bf16},
                                         {1000, 2304, 8, DType::bf16},
                                         {3, 8, 0, DType::f16},
                                         {333, 64, 4, DType::f32},
                                         {5, 12, 0, DType::f32},
                                         {7, 7, 0, DType::bf16},
                                         {9, 12, 1, DType::f32}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(k.dt) << " rows " << k.rows << " cols " << k.cols << " pad "
                                      << k.pad);
    const Tensor full = random_tensor({k.rows, k.cols + k.pad}, k.dt, seed++, -2.0, 2.0);
    const Tensor dy = to_gpu(full).narrow(1, 0, k.cols);
    const Tensor x = to_gpu(random_tensor({k.rows, 3}, k.dt, seed++));
    const Tensor dw = gpu_nan({k.cols, 3}, kNCHW, k.dt);
    Tensor db = gpu_nan({k.cols}, kNCHW, k.dt);
    be().linear_bwd_weight({x, dy, dw, db});
    const std::vector<double> host = host_as(full, DType::f64).to_vector<double>();
    const std::vector<double> got = host_as(db, DType::f64).to_vector<double>();
    const double ulp = k.dt == DType::f32 ? 0x1p-23 : k.dt == DType::bf16 ? 0x1p-7 : 0x1p-10;
    for (int64_t c = 0; c < k.cols; ++c) {
      double want = 0.0;
      for (int64_t r = 0; r < k.rows; ++r) want += host[r * (k.cols + k.pad) + c];
      ASSERT_LE(std::abs(got[c] - want), ulp * std::abs(want) + 1e-9 * k.rows) << "column " << c;
    }
    const Tensor again = gpu_nan({k.cols}, kNCHW, k.dt);
    be().linear_bwd_weight({x, dy, gpu_nan({k.cols, 3}, kNCHW, k.dt), again});
    EXPECT_TRUE(same_values(again, db)) << "a second call differs";
    const Tensor shifted = gpu_nan({k.rows, k.cols + k.pad + 1}, kNCHW, k.dt).narrow(1, 1, k.cols + k.pad);
    copy_into(to_gpu(full), shifted);
    const Tensor misaligned = gpu_nan({k.cols}, kNCHW, k.dt);
    be().linear_bwd_weight({x, shifted.narrow(1, 0, k.cols), gpu_nan({k.cols, 3}, kNCHW, k.dt), misaligned});
    EXPECT_TRUE(same_values(misaligned, db)) << "rows one element past alignment differ";
  }
}

TEST_F(CudaNormPoolLinear, LinearStagedOutput) {
  // y as a transposed (column-major) view: cuBLAS writes row-major, so it is staged.
  const Pair x = rand_pair({4, 6}, 1700), w = rand_pair({5, 6}, 1701), b = rand_pair({5}, 1702);
  const Pair yt = nan_pair({5, 4});
  const Tensor yg = yt.gpu.permute({1, 0}), yc = yt.cpu.permute({1, 0});
  be().linear_fwd({x.gpu, w.gpu, b.gpu, yg});
  ref_.linear_fwd({x.cpu, w.cpu, b.cpu, yc});
  STRATA_EXPECT_CLOSE(yg, yc, kTolGemm, "linear_fwd transposed y");
}

TEST_F(CudaNormPoolLinear, LinearHalf) {
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    ASSERT_TRUE(be().capabilities().supports(ops::OpId::linear_fwd, dt));
    const Tensor x = random_tensor({16, 64}, dt, 1800), w = random_tensor({32, 64}, dt, 1801);
    const Tensor b = random_tensor({32}, dt, 1802);
    auto f32 = [](const Tensor& t) {
      Tensor o = Tensor::empty(t.sizes());
      copy_into(t, o);
      return o;
    };
    const Tensor y = gpu_nan({16, 32}, kNCHW, dt), y_ref = cpu_nan({16, 32});
    be().linear_fwd({to_gpu(x), to_gpu(w), to_gpu(b), y});
    ref_.linear_fwd({f32(x), f32(w), f32(b), y_ref});
    STRATA_EXPECT_CLOSE(y, y_ref, dt == DType::f16 ? kTolF16 : kTolBf16, "linear_fwd half");
    // The bias in cuBLASLt's epilogue (gemm_lt.h): odd sizes, x one element past alignment (the
    // heuristic asked for algorithms at 2-byte alignment), y in rows longer than it.
    const Tensor xw = random_tensor({33, 71}, dt, 1803), w2 = random_tensor({45, 70}, dt, 1804);
    const Tensor b2 = random_tensor({45}, dt, 1805);
    const Tensor yw = gpu_nan({33, 48}, kNCHW, dt), yw_ref = cpu_nan({33, 48});
    be().linear_fwd({to_gpu(xw).narrow(1, 1, 70), to_gpu(w2), to_gpu(b2), yw.narrow(1, 0, 45)});
    ref_.linear_fwd({f32(xw).narrow(1, 1, 70), f32(w2), f32(b2), yw_ref.narrow(1, 0, 45)});
    STRATA_EXPECT_CLOSE(yw.narrow(1, 0, 45), yw_ref.narrow(1, 0, 45), dt == DType::f16 ? kTolF16 : kTolBf16,
                        "linear_fwd half, odd sizes, unaligned x");
    for (float v : host_as(yw.narrow(1, 45, 3), DType::f32).to_vector<float>())
      ASSERT_TRUE(std::isnan(v)) << "linear_fwd wrote past y's 45 columns";
  }
}

}  // namespace
}  // namespace strata::testing
