// batch_norm (training with running-stat update, eval; forward and backward), max
// and average pooling, global average pooling on each CPU backend against the
// reference. Tolerance kTolReduction (1e-5) for all of them.
#include <cmath>
#include <string>

#include "cpu_backend_test_util.h"
#include "support/pool_params.h"
#include "strata/ops/table/relu_mask.h"
#include "support/space_to_depth_cases.h"

namespace strata::testing {
namespace {

STRATA_COVERS(batch_norm_fwd, "vs_reference");
STRATA_COVERS(batch_norm_bwd, "vs_reference");
STRATA_COVERS(max_pool2d_fwd, "vs_reference");
STRATA_COVERS(max_pool2d_bwd, "vs_reference");
STRATA_COVERS(avg_pool2d_fwd, "vs_reference");
STRATA_COVERS(avg_pool2d_bwd, "vs_reference");
STRATA_COVERS(global_avg_pool_fwd, "vs_reference");
STRATA_COVERS(global_avg_pool_bwd, "vs_reference");
STRATA_COVERS(space_to_depth_fwd, "vs_reference");
STRATA_COVERS(space_to_depth_bwd, "vs_reference");

class NormPoolTest : public CpuBackendTest {};

// ---------------------------------------------------------------- batch norm

void check_batch_norm(Backend& be, ReferenceBackend& ref, const std::string& name, const Shape& xs, MemoryFormat fmt,
                      bool training, uint64_t seed) {
  SCOPED_TRACE(name + (training ? " training" : " eval"));
  const int64_t c = xs[1];
  const Tensor x = rand_f32(xs, seed, fmt, -2.0, 3.0);  // a non-zero mean
  const Tensor gamma = rand_f32({c}, seed + 1, kNCHW, 0.5, 1.5), beta = rand_f32({c}, seed + 2);
  const Tensor rm = rand_f32({c}, seed + 3, kNCHW, -0.5, 0.5), rv = rand_f32({c}, seed + 4, kNCHW, 0.5, 2.0);
  const Tensor rm_b = copy_of(rm), rv_b = copy_of(rv), rm_r = copy_of(rm), rv_r = copy_of(rv);
  const Tensor y = nan_tensor(xs, fmt), y_r = nan_tensor(xs, fmt);
  const Tensor sm = nan_tensor({c}), si = nan_tensor({c}), sm_r = nan_tensor({c}), si_r = nan_tensor({c});

  ops::BatchNormFwdArgs f{x, gamma, beta, rm_b, rv_b, y, sm, si};
  f.eps = 1e-5, f.momentum = 0.1, f.training = training;
  be.batch_norm_fwd(f);
  f.running_mean = rm_r, f.running_var = rv_r, f.y = y_r, f.save_mean = sm_r, f.save_invstd = si_r;
  ref.batch_norm_fwd(f);
  STRATA_EXPECT_CLOSE(y, y_r, kTolReduction, "batch_norm_fwd y");
  STRATA_EXPECT_CLOSE(sm, sm_r, kTolReduction, "batch_norm_fwd save_mean");
  STRATA_EXPECT_CLOSE(si, si_r, kTolReduction, "batch_norm_fwd save_invstd");
  STRATA_EXPECT_CLOSE(rm_b, rm_r, kTolReduction, "batch_norm_fwd running_mean");
  STRATA_EXPECT_CLOSE(rv_b, rv_r, kTolReduction, "batch_norm_fwd running_var");

  // Backward from the reference's saved statistics, so it is checked on its own.
  const Tensor dy = rand_f32(xs, seed + 5, fmt);
  const Tensor dx = nan_tensor(xs, fmt), dx_r = nan_tensor(xs, fmt);
  const Tensor dg = nan_tensor({c}), db = nan_tensor({c}), dg_r = nan_tensor({c}), db_r = nan_tensor({c});
  ops::BatchNormBwdArgs bw{x, dy, gamma, sm_r, si_r, dx, dg, db};
  bw.training = training;
  be.batch_norm_bwd(bw);
  bw.dx = dx_r, bw.dgamma = dg_r, bw.dbeta = db_r;
  ref.batch_norm_bwd(bw);
  STRATA_EXPECT_CLOSE(dx, dx_r, kTolReduction, "batch_norm_bwd dx");
  STRATA_EXPECT_CLOSE(dg, dg_r, kTolReduction, "batch_norm_bwd dgamma");
  STRATA_EXPECT_CLOSE(db, db_r, kTolReduction, "batch_norm_bwd dbeta");
}

TEST_P(NormPoolTest, BatchNormSmallShapes) {
  uint64_t seed = 1000;
  for (bool training : {true, false}) {
    check_batch_norm(be(), ref_, "odd_2x3x5x7", {2, 3, 5, 7}, kNCHW, training, seed += 10);
    check_batch_norm(be(), ref_, "batch1_1x4x3x3", {1, 4, 3, 3}, kNCHW, training, seed += 10);
    check_batch_norm(be(), ref_, "nhwc_2x8x4x4", {2, 8, 4, 4}, kNHWC, training, seed += 10);
    check_batch_norm(be(), ref_, "rank2_5x6", {5, 6}, kNCHW, training, seed += 10);
  }
}

TEST_P(NormPoolTest, BatchNormResNet50Shapes) {
  uint64_t seed = 2000;
  for (bool training : {true, false}) {
    check_batch_norm(be(), ref_, "bn_2x256x8x8", {2, 256, 8, 8}, kNCHW, training, seed += 10);
    check_batch_norm(be(), ref_, "bn_2x64x16x16_nhwc", {2, 64, 16, 16}, kNHWC, training, seed += 10);
  }
}

// Fused evaluation (op_args.h): y = relu?(bn(x) + z) in one call, against the reference's
// separate batch norm, add and ReLU; the reference's own fused form bitwise equal to them.
TEST_P(NormPoolTest, BatchNormFusedEvaluation) {
  uint64_t seed = 2500;
  for (MemoryFormat fmt : {kNCHW, kNHWC}) {
    for (bool with_z : {true, false}) {
      for (bool relu : {true, false}) {
        if (!with_z && !relu) continue;
        SCOPED_TRACE(::testing::Message() << (fmt == kNHWC ? "nhwc" : "nchw") << (with_z ? " +z" : "")
                                          << (relu ? " relu" : ""));
        const Shape s{2, 6, 5, 3};
        const Tensor x = rand_f32(s, seed += 10, fmt), z = rand_f32(s, seed + 1, fmt);
        const Tensor gamma = rand_f32({6}, seed + 2), beta = rand_f32({6}, seed + 3);
        const Tensor rm = rand_f32({6}, seed + 4), rv = rand_f32({6}, seed + 5, kNCHW, 0.5, 2.0);
        // The separate ops on the reference.
        const Tensor bn = nan_tensor(s, fmt), sum = nan_tensor(s, fmt), want = nan_tensor(s, fmt);
        ops::BatchNormFwdArgs plain{x, gamma, beta, rm, rv, bn, {}, {}};
        plain.training = false;
        ref_.batch_norm_fwd(plain);
        Tensor cur = bn;
        if (with_z) ref_.add({bn, z, sum}), cur = sum;
        if (relu) ref_.relu_fwd({cur, want}), cur = want;
        ops::BatchNormFwdArgs f = plain;
        f.z = with_z ? ops::TensorView(z) : ops::TensorView();
        f.relu = relu;
        const Tensor y = nan_tensor(s, fmt), y_r = nan_tensor(s, fmt);
        f.y = y;
        be().batch_norm_fwd(f);
        f.y = y_r;
        ref_.batch_norm_fwd(f);
        EXPECT_TRUE(bitwise_equal(y_r, cur)) << "[reference fused vs separate]";
        STRATA_EXPECT_CLOSE(y, cur, kTolReduction, "batch_norm_fwd fused");
      }
    }
  }
}

// Fused training (op_args.h): the forward as the reference's separate batch norm, add and
// ReLU, with a ReLU mask of the backend's own output; the backward, from the reference's
// mask, as the separate ReLU backward then batch norm backward, dz the masked dy bitwise.
// The reference's fused forms are bitwise its separate ops.
TEST_P(NormPoolTest, BatchNormFusedTraining) {
  uint64_t seed = 2700;
  for (const Shape& s : {Shape{2, 6, 5, 3}, Shape{1, 3, 5, 3}})
  for (MemoryFormat fmt : {kNCHW, kNHWC})
    for (int variant = 0; variant < 3; ++variant) {
      const bool with_z = variant != 1, relu = variant != 2;
      SCOPED_TRACE(::testing::Message() << s.str() << (fmt == kNHWC ? " nhwc" : " nchw") << (with_z ? " +z" : "")
                                        << (relu ? " relu" : ""));
      const int64_t c = s[1];
      const Tensor x = rand_f32(s, seed += 10, fmt, -2.0, 3.0), z = rand_f32(s, seed + 1, fmt);
      const Tensor gamma = rand_f32({c}, seed + 2, kNCHW, 0.5, 1.5), beta = rand_f32({c}, seed + 3);
      const Tensor rm = rand_f32({c}, seed + 4, kNCHW, -0.5, 0.5), rv = rand_f32({c}, seed + 5, kNCHW, 0.5, 2.0);
      // The separate ops on the reference.
      const Tensor rm_s = copy_of(rm), rv_s = copy_of(rv), sm_s = nan_tensor({c}), si_s = nan_tensor({c});
      const Tensor bn = nan_tensor(s, fmt), sum = nan_tensor(s, fmt), act = nan_tensor(s, fmt);
      ref_.batch_norm_fwd({x, gamma, beta, rm_s, rv_s, bn, sm_s, si_s});
      Tensor want = bn;
      if (with_z) ref_.add({bn, z, sum}), want = sum;
      if (relu) ref_.relu_fwd({want, act}), want = act;
      // Fused, on the reference and on the backend.
      const int64_t bytes = ops::relu_mask_bytes(x.numel());
      const Tensor mask_r = Tensor::empty(Shape{bytes}, DType::u8), mask = Tensor::empty(Shape{bytes}, DType::u8);
      const Tensor rm_r = copy_of(rm), rv_r = copy_of(rv), sm_r = nan_tensor({c}), si_r = nan_tensor({c});
      const Tensor rm_b = copy_of(rm), rv_b = copy_of(rv), sm = nan_tensor({c}), si = nan_tensor({c});
      const Tensor y_r = nan_tensor(s, fmt), y = nan_tensor(s, fmt);
      ops::BatchNormFwdArgs f{x, gamma, beta, rm_r, rv_r, y_r, sm_r, si_r};
      if (with_z) f.z = z;
      f.relu = relu;
      if (relu) f.relu_mask = mask_r;
      ref_.batch_norm_fwd(f);
      f.running_mean = rm_b, f.running_var = rv_b, f.y = y, f.save_mean = sm, f.save_invstd = si;
      if (relu) f.relu_mask = mask;
      be().batch_norm_fwd(f);
      EXPECT_TRUE(bitwise_equal(y_r, want)) << "[reference fused vs separate]";
      EXPECT_TRUE(bitwise_equal(rv_r, rv_s) && bitwise_equal(si_r, si_s)) << "[reference fused statistics]";
      STRATA_EXPECT_CLOSE(y, want, kTolReduction, "batch_norm_fwd fused y");
      STRATA_EXPECT_CLOSE(sm, sm_s, kTolReduction, "save_mean");
      STRATA_EXPECT_CLOSE(si, si_s, kTolReduction, "save_invstd");
      STRATA_EXPECT_CLOSE(rm_b, rm_s, kTolReduction, "running_mean");
      STRATA_EXPECT_CLOSE(rv_b, rv_s, kTolReduction, "running_var");
      if (relu) {
        for (const auto& [m, out] : {std::pair{mask_r, y_r}, std::pair{mask, y}})
          for (int64_t i = 0; i < out.numel(); ++i)  // offset i of the output's storage
            ASSERT_EQ(ops::relu_mask_bit(m.data<uint8_t>(), i), out.data<float>()[i] > 0.f) << "mask bit " << i;
      }
      // Backward: the separate ops on the reference, then fused.
      const Tensor dy = rand_f32(s, seed + 6, fmt), g = nan_tensor(s, fmt);
      Tensor g_s = dy;
      if (relu) ref_.relu_bwd({want, dy, g}), g_s = g;
      const Tensor dx_s = nan_tensor(s, fmt), dg_s = nan_tensor({c}), db_s = nan_tensor({c});
      ref_.batch_norm_bwd({x, g_s, gamma, sm_s, si_s, dx_s, dg_s, db_s});
      if (!relu) continue;  // without a ReLU the backward is the plain one (dz = dy)
      for (bool own : {false, true}) {
        SCOPED_TRACE(own ? "backend" : "reference");
        const Tensor dx = nan_tensor(s, fmt), dg = nan_tensor({c}), db = nan_tensor({c});
        const Tensor dz = nan_tensor(s, fmt);
        ops::BatchNormBwdArgs b{x, dy, gamma, sm_s, si_s, dx, dg, db};
        b.relu_mask = mask_r;
        if (with_z) b.dz = dz;
        if (own)
          be().batch_norm_bwd(b);
        else
          ref_.batch_norm_bwd(b);
        if (own) {
          STRATA_EXPECT_CLOSE(dx, dx_s, kTolReduction, "batch_norm_bwd fused dx");
          STRATA_EXPECT_CLOSE(dg, dg_s, kTolReduction, "batch_norm_bwd fused dgamma");
          STRATA_EXPECT_CLOSE(db, db_s, kTolReduction, "batch_norm_bwd fused dbeta");
        } else {
          EXPECT_TRUE(bitwise_equal(dx, dx_s) && bitwise_equal(dg, dg_s) && bitwise_equal(db, db_s));
        }
        if (with_z) {
          EXPECT_TRUE(bitwise_equal(dz, g_s)) << "dz is the masked dy";
        }
      }
    }
}

// ---------------------------------------------------------------- pooling


// Values from {-1, -0.5, 0, 0.5, 1}: windows full of ties, where only the
// "first maximum in row-major order" rule decides where the gradient goes.
Tensor tied_tensor(const Shape& s, uint64_t seed, MemoryFormat fmt) {
  const std::vector<double> v = rand_f32(s, seed).to_vector<double>();
  std::vector<double> q(v.size());
  for (size_t i = 0; i < v.size(); ++i) q[i] = std::round(v[i] * 2.0) / 2.0;
  Tensor out = Tensor::empty(s, DType::f32, Device::cpu(), fmt);
  copy_into(Tensor::from_vector(q, s), out);
  return out;
}

void check_max_pool(Backend& be, ReferenceBackend& ref, const std::string& name, const Tensor& x,
                    const Pool2dParams& p, MemoryFormat fmt, uint64_t seed) {
  SCOPED_TRACE(name);
  const Shape ys = pool_out(x.sizes(), p);
  const Tensor y = nan_tensor(ys, fmt), y_r = nan_tensor(ys, fmt);
  be.max_pool2d_fwd({x, y, p});
  ref.max_pool2d_fwd({x, y_r, p});
  EXPECT_TRUE(bitwise_equal(y, y_r)) << "[max_pool2d_fwd]";  // a max is exact
  const Tensor dy = rand_f32(ys, seed, fmt);
  const Tensor dx = nan_tensor(x.sizes(), fmt), dx_r = nan_tensor(x.sizes(), fmt);
  be.max_pool2d_bwd({x, y_r, dy, dx, p});
  ref.max_pool2d_bwd({x, y_r, dy, dx_r, p});
  STRATA_EXPECT_CLOSE(dx, dx_r, kTolReduction, "max_pool2d_bwd");
}

void check_avg_pool(Backend& be, ReferenceBackend& ref, const std::string& name, const Shape& xs,
                    const Pool2dParams& p, MemoryFormat fmt, uint64_t seed) {
  SCOPED_TRACE(name + (p.count_include_pad ? " include_pad" : " exclude_pad"));
  const Shape ys = pool_out(xs, p);
  const Tensor x = rand_f32(xs, seed, fmt);
  const Tensor y = nan_tensor(ys, fmt), y_r = nan_tensor(ys, fmt);
  be.avg_pool2d_fwd({x, y, p});
  ref.avg_pool2d_fwd({x, y_r, p});
  STRATA_EXPECT_CLOSE(y, y_r, kTolReduction, "avg_pool2d_fwd");
  const Tensor dy = rand_f32(ys, seed + 1, fmt);
  const Tensor dx = nan_tensor(xs, fmt), dx_r = nan_tensor(xs, fmt);
  be.avg_pool2d_bwd({dy, dx, p});
  ref.avg_pool2d_bwd({dy, dx_r, p});
  STRATA_EXPECT_CLOSE(dx, dx_r, kTolReduction, "avg_pool2d_bwd");
}

TEST_P(NormPoolTest, MaxPool) {
  uint64_t seed = 3000;
  check_max_pool(be(), ref_, "3x3_s2_p1_odd", rand_f32({2, 3, 9, 9}, seed), square_pool(3, 2, 1), kNCHW, seed + 1);
  check_max_pool(be(), ref_, "2x2_s2_batch1", rand_f32({1, 2, 6, 6}, seed + 2), square_pool(2, 2, 0), kNCHW, seed + 3);
  check_max_pool(be(), ref_, "3x3_s1_p1_overlap", rand_f32({1, 3, 5, 5}, seed + 4), square_pool(3, 1, 1), kNCHW,
                 seed + 5);
  check_max_pool(be(), ref_, "nhwc_3x3_s2_p1", rand_f32({2, 8, 7, 7}, seed + 6, kNHWC), square_pool(3, 2, 1), kNHWC,
                 seed + 7);
  check_max_pool(be(), ref_, "ties_first_max_wins", tied_tensor({2, 4, 8, 8}, seed + 8, kNCHW), square_pool(3, 2, 1),
                 kNCHW, seed + 9);
  check_max_pool(be(), ref_, "ties_nhwc", tied_tensor({1, 16, 6, 6}, seed + 10, kNHWC), square_pool(2, 1, 0), kNHWC,
                 seed + 11);
  check_max_pool(be(), ref_, "resnet_stem_pool_2x64x16x16", rand_f32({2, 64, 16, 16}, seed + 12), square_pool(3, 2, 1),
                 kNCHW, seed + 13);
}

TEST_P(NormPoolTest, AvgPool) {
  uint64_t seed = 4000;
  for (bool include : {true, false}) {
    check_avg_pool(be(), ref_, "3x3_s2_p1_odd", {2, 3, 9, 8}, square_pool(3, 2, 1, include), kNCHW, seed += 10);
    check_avg_pool(be(), ref_, "2x2_s2_batch1", {1, 2, 6, 6}, square_pool(2, 2, 0, include), kNCHW, seed += 10);
    check_avg_pool(be(), ref_, "nhwc_3x3_s1_p1", {2, 8, 5, 5}, square_pool(3, 1, 1, include), kNHWC, seed += 10);
  }
}

TEST_P(NormPoolTest, GlobalAvgPool) {
  struct Case {
    std::string name;
    Shape x;
    MemoryFormat fmt;
  };
  const std::vector<Case> cases = {{"odd_2x8x5x5", {2, 8, 5, 5}, kNCHW},
                                   {"nhwc_2x16x3x3", {2, 16, 3, 3}, kNHWC},
                                   {"resnet_2x2048x1x1", {2, 2048, 1, 1}, kNCHW},
                                   {"resnet_2x2048x4x4", {2, 2048, 4, 4}, kNCHW}};
  uint64_t seed = 5000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Shape ys{c.x[0], c.x[1]};
    const Tensor x = rand_f32(c.x, seed += 10, c.fmt);
    const Tensor y = nan_tensor(ys), y_r = nan_tensor(ys);
    be().global_avg_pool_fwd({x, y});
    ref_.global_avg_pool_fwd({x, y_r});
    STRATA_EXPECT_CLOSE(y, y_r, kTolReduction, "global_avg_pool_fwd");
    const Tensor dy = rand_f32(ys, seed + 1);
    const Tensor dx = nan_tensor(c.x, c.fmt), dx_r = nan_tensor(c.x, c.fmt);
    be().global_avg_pool_bwd({dy, dx});
    ref_.global_avg_pool_bwd({dy, dx_r});
    STRATA_EXPECT_CLOSE(dx, dx_r, kTolReduction, "global_avg_pool_bwd");
  }
}

// Data movement: every dtype a model computes in, both layouts, equal bit for bit.
TEST_P(NormPoolTest, SpaceToDepthMatchesReference) {
  uint64_t seed = 5200;
  for (const DType dt : {DType::f32, DType::bf16}) {
    if (!be().capabilities().supports(ops::OpId::space_to_depth_fwd, dt)) continue;
    for (const MemoryFormat fmt : {kNCHW, kNHWC})
      for (const SpaceToDepthCase& c : space_to_depth_cases()) {
        SCOPED_TRACE(c.x.str() + " " + std::string(dtype_name(dt)) + (fmt == kNHWC ? " nhwc" : " nchw"));
        const auto empty = [&](const Shape& s) { return Tensor::empty(s, dt, Device::cpu(), fmt); };
        const Tensor x = random_tensor(c.x, dt, seed += 10, -1, 1, fmt);
        const Tensor y = empty(c.y()), y_r = empty(c.y());
        be().space_to_depth_fwd({x, y, c.params()});
        ref_.space_to_depth_fwd({x, y_r, c.params()});
        EXPECT_TRUE(bitwise_equal(y, y_r));
        const Tensor dy = random_tensor(c.y(), dt, seed + 1, -1, 1, fmt);
        const Tensor dx = empty(c.x), dx_r = empty(c.x);
        be().space_to_depth_bwd({dy, dx, c.params()});
        ref_.space_to_depth_bwd({dy, dx_r, c.params()});
        EXPECT_TRUE(bitwise_equal(dx, dx_r));
      }
  }
}

STRATA_CPU_BACKEND_SUITE(NormPoolTest);

}  // namespace
}  // namespace strata::testing
