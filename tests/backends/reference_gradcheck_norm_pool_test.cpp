// batch_norm and pooling on the reference backend: backward ops against central
// differences in f64, forward values and running statistics against hand formulas.
#include <gtest/gtest.h>

#include "reference_test_util.h"
#include "support/coverage.h"
#include "support/pool_params.h"
#include "strata/core/factories.h"
#include "strata/ops/table/relu_mask.h"

namespace strata::testing {
namespace {

STRATA_COVERS(batch_norm_fwd, "gradcheck");
STRATA_COVERS(batch_norm_fwd, "values");
STRATA_COVERS(batch_norm_bwd, "gradcheck");
STRATA_COVERS(max_pool2d_fwd, "gradcheck");
STRATA_COVERS(max_pool2d_fwd, "values");
STRATA_COVERS(max_pool2d_bwd, "gradcheck");
STRATA_COVERS(max_pool2d_bwd, "values");
STRATA_COVERS(avg_pool2d_fwd, "gradcheck");
STRATA_COVERS(avg_pool2d_fwd, "values");
STRATA_COVERS(avg_pool2d_bwd, "gradcheck");
STRATA_COVERS(global_avg_pool_fwd, "gradcheck");
STRATA_COVERS(global_avg_pool_fwd, "values");
STRATA_COVERS(global_avg_pool_bwd, "gradcheck");

// ---------------------------------------------------------------- batch_norm

struct BnCase {
  const char* name;
  Shape x;
  MemoryFormat fmt;
  bool training;
};

const BnCase kBnCases[] = {
    {"train_nchw", {3, 4, 3, 5}, kNCHW, true},   {"train_nhwc", {2, 3, 5, 3}, kNHWC, true},
    {"train_batch1", {1, 2, 3, 5}, kNCHW, true}, {"train_rank2", {5, 4}, kNCHW, true},
    {"eval_nchw", {2, 3, 3, 5}, kNCHW, false},   {"eval_nhwc", {2, 3, 5, 3}, kNHWC, false},
    {"eval_rank2_batch1", {1, 6}, kNCHW, false},
};

class BatchNormGradcheck : public ::testing::TestWithParam<BnCase> {};

TEST_P(BatchNormGradcheck, AllInputsMatchCentralDifferences) {
  const BnCase& c = GetParam();
  const int64_t C = c.x[1];
  ReferenceBackend ref;
  const MemoryFormat fmt = c.x.size() == 4 ? c.fmt : kNCHW;
  const Tensor x = random_tensor(c.x, DType::f64, 21, -2, 2, fmt);
  const Tensor gamma = random_tensor({C}, DType::f64, 22, 0.5, 1.5);
  const Tensor beta = random_tensor({C}, DType::f64, 23);
  const Tensor rm0 = random_tensor({C}, DType::f64, 24);
  const Tensor rv0 = random_tensor({C}, DType::f64, 25, 0.5, 1.5);
  const Tensor y = nan_tensor(c.x, DType::f64, fmt);
  const Tensor cot = random_tensor(c.x, DType::f64, 26, -1, 1, fmt);
  const Tensor save_mean = nan_tensor({C}), save_invstd = nan_tensor({C});
  auto forward = [&] {
    // Fresh running stats each call: training updates them in place.
    const Tensor rm = rm0.clone(), rv = rv0.clone();
    ops::BatchNormFwdArgs a{x, gamma, beta, rm, rv, y, save_mean, save_invstd};
    a.eps = 1e-3;
    a.training = c.training;
    ref.batch_norm_fwd(a);
  };
  auto loss = [&] {
    forward();
    return dot(y, cot);
  };
  forward();
  const Tensor dx = nan_tensor(c.x, DType::f64, fmt), dgamma = nan_tensor({C}), dbeta = nan_tensor({C});
  ops::BatchNormBwdArgs b{x, cot, gamma, save_mean, save_invstd, dx, dgamma, dbeta};
  b.training = c.training;
  ref.batch_norm_bwd(b);
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
  EXPECT_TRUE(grad_matches("dgamma", dgamma, numeric_grad(gamma, loss)));
  EXPECT_TRUE(grad_matches("dbeta", dbeta, numeric_grad(beta, loss)));
}

INSTANTIATE_TEST_SUITE_P(Reference, BatchNormGradcheck, ::testing::ValuesIn(kBnCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Fused training (op_args.h): y = relu?(bn(x) + z); its backward takes the forward's ReLU
// mask and returns the residual's gradient dz. Against central differences, with the
// mask equal to y > 0.
TEST(ReferenceBatchNorm, FusedTrainingMatchesCentralDifferences) {
  ReferenceBackend ref;
  for (MemoryFormat fmt : {kNCHW, kNHWC}) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool with_z = variant != 1, relu = variant != 2;
      SCOPED_TRACE(::testing::Message() << (fmt == kNHWC ? "nhwc" : "nchw") << (with_z ? " +z" : "")
                                        << (relu ? " relu" : ""));
      const Shape xs{2, 3, 3, 5};  // 90 values: the mask's last byte is partial
      const Tensor x = random_tensor(xs, DType::f64, 41, -2, 2, fmt), z = random_tensor(xs, DType::f64, 42, -1, 1, fmt);
      const Tensor gamma = random_tensor({3}, DType::f64, 43, 0.5, 1.5), beta = random_tensor({3}, DType::f64, 44);
      const Tensor y = nan_tensor(xs, DType::f64, fmt), cot = random_tensor(xs, DType::f64, 45, -1, 1, fmt);
      const Tensor save_mean = nan_tensor({3}), save_invstd = nan_tensor({3});
      const Tensor mask = Tensor::empty(Shape{ops::relu_mask_bytes(x.numel())}, DType::u8);
      auto forward = [&] {
        const Tensor rm = zeros(Shape{3}, DType::f64), rv = zeros(Shape{3}, DType::f64);
        ops::BatchNormFwdArgs a{x, gamma, beta, rm, rv, y, save_mean, save_invstd};
        a.eps = 1e-3;
        if (with_z) a.z = z;
        a.relu = relu;
        if (relu) a.relu_mask = mask;
        ref.batch_norm_fwd(a);
      };
      auto loss = [&] {
        forward();
        return dot(y, cot);
      };
      forward();
      if (relu) {
        // Bit i belongs to the value at offset i of y's storage (its memory order).
        const double* yp = y.data<double>();
        for (int64_t i = 0; i < y.numel(); ++i)
          ASSERT_EQ(ops::relu_mask_bit(mask.data<uint8_t>(), i), yp[i] > 0.0) << "mask bit " << i;
      }
      const Tensor dx = nan_tensor(xs, DType::f64, fmt), dz = nan_tensor(xs, DType::f64, fmt);
      const Tensor dgamma = nan_tensor({3}), dbeta = nan_tensor({3});
      ops::BatchNormBwdArgs b{x, cot, gamma, save_mean, save_invstd, dx, dgamma, dbeta};
      if (relu) b.relu_mask = mask, b.dz = dz;
      ref.batch_norm_bwd(b);
      EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
      EXPECT_TRUE(grad_matches("dgamma", dgamma, numeric_grad(gamma, loss)));
      EXPECT_TRUE(grad_matches("dbeta", dbeta, numeric_grad(beta, loss)));
      if (with_z) {
        EXPECT_TRUE(grad_matches("dz", relu ? dz : cot, numeric_grad(z, loss)));
      }
    }
  }
}

TEST(ReferenceBatchNorm, TrainingValuesAndRunningStats) {
  ReferenceBackend ref;
  // Channel 0 holds 1,2,3,4 and channel 1 holds 10,20,30,40 (x [2,2,1,2], NHWC storage).
  const Tensor x = from_values({1, 2, 10, 20, 3, 4, 30, 40}, {2, 2, 1, 2}, DType::f64, kNHWC);
  const Tensor gamma = from_values({2, 1}, {2}), beta = from_values({0.5, -1}, {2});
  const Tensor rm = from_values({1, 2}, {2}), rv = from_values({3, 4}, {2});
  const Tensor y = nan_tensor({2, 2, 1, 2}), sm = nan_tensor({2}), si = nan_tensor({2});
  ops::BatchNormFwdArgs a{x, gamma, beta, rm, rv, y, sm, si};
  a.eps = 1e-5;
  a.momentum = 0.1;
  ref.batch_norm_fwd(a);
  // mean 2.5 / 25, biased var 1.25 / 125, unbiased 5/3 / 500/3.
  const std::vector<double> mean{2.5, 25}, var{1.25, 125}, unb{5.0 / 3, 500.0 / 3};
  const std::vector<double> g{2, 1}, bt{0.5, -1};
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for (int i = 0; i < 8; ++i) {
    const int c = (i / 2) % 2;
    const double want = (xv[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * g[c] + bt[c];
    EXPECT_NEAR(yv[i], want, 1e-12) << "element " << i;
  }
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(sm.to_vector<double>()[c], mean[c], 1e-12);
    EXPECT_NEAR(si.to_vector<double>()[c], 1 / std::sqrt(var[c] + 1e-5), 1e-12);
  }
  // running = 0.9 running + 0.1 batch, with the unbiased variance (as PyTorch).
  EXPECT_NEAR(rm.to_vector<double>()[0], 0.9 * 1 + 0.1 * 2.5, 1e-12);
  EXPECT_NEAR(rm.to_vector<double>()[1], 0.9 * 2 + 0.1 * 25, 1e-12);
  EXPECT_NEAR(rv.to_vector<double>()[0], 0.9 * 3 + 0.1 * unb[0], 1e-12);
  EXPECT_NEAR(rv.to_vector<double>()[1], 0.9 * 4 + 0.1 * unb[1], 1e-12);
}

TEST(ReferenceBatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({3, 2}, DType::f64, 31);
  const Tensor gamma = from_values({2, 3}, {2}), beta = from_values({0.25, -0.5}, {2});
  const Tensor rm = from_values({0.1, -0.2}, {2}), rv = from_values({0.5, 2}, {2});
  const Tensor y = nan_tensor({3, 2}), sm = nan_tensor({2}), si = nan_tensor({2});
  ops::BatchNormFwdArgs a{x, gamma, beta, rm, rv, y, sm, si};
  a.eps = 1e-3;
  a.training = false;
  ref.batch_norm_fwd(a);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  const double m[2] = {0.1, -0.2}, v[2] = {0.5, 2}, g[2] = {2, 3}, b[2] = {0.25, -0.5};
  for (int i = 0; i < 6; ++i) {
    const int c = i % 2;
    EXPECT_NEAR(yv[i], (xv[i] - m[c]) / std::sqrt(v[c] + 1e-3) * g[c] + b[c], 1e-12);
  }
  EXPECT_EQ(rm.to_vector<double>(), (std::vector<double>{0.1, -0.2}));
  EXPECT_EQ(rv.to_vector<double>(), (std::vector<double>{0.5, 2}));
  EXPECT_EQ(sm.to_vector<double>(), (std::vector<double>{0.1, -0.2}));
  EXPECT_NEAR(si.to_vector<double>()[0], 1 / std::sqrt(0.5 + 1e-3), 1e-15);
  EXPECT_NEAR(si.to_vector<double>()[1], 1 / std::sqrt(2 + 1e-3), 1e-15);
}

TEST(ReferenceBatchNorm, TrainingWithOneValuePerChannelThrows) {
  ReferenceBackend ref;
  const Tensor x = random_tensor({1, 3}, DType::f64, 1);
  const Tensor g = random_tensor({3}, DType::f64, 2), b = random_tensor({3}, DType::f64, 3);
  const Tensor rm = random_tensor({3}, DType::f64, 4), rv = random_tensor({3}, DType::f64, 5, 0.5, 1);
  const Tensor y = nan_tensor({1, 3}), sm = nan_tensor({3}), si = nan_tensor({3});
  EXPECT_THROW(ref.batch_norm_fwd({x, g, b, rm, rv, y, sm, si}), Error);
}

// ---------------------------------------------------------------- pooling

struct PoolCase {
  const char* name;
  Shape x;
  int kh, kw, sh, sw, ph, pw;
  bool include_pad;
  MemoryFormat fmt;
  Pool2dParams params() const {
    Pool2dParams p;
    p.kernel_h = kh, p.kernel_w = kw, p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw;
    p.count_include_pad = include_pad;
    return p;
  }
  Shape y() const { return {x[0], x[1], (x[2] + 2 * ph - kh) / sh + 1, (x[3] + 2 * pw - kw) / sw + 1}; }
};

const PoolCase kPoolCases[] = {
    {"k2s2_nchw", {2, 3, 6, 4}, 2, 2, 2, 2, 0, 0, true, kNCHW},
    {"k3s2p1_odd_nhwc", {2, 2, 7, 5}, 3, 3, 2, 2, 1, 1, true, kNHWC},
    {"k3s2p1_odd_exclude_pad", {1, 3, 7, 5}, 3, 3, 2, 2, 1, 1, false, kNCHW},
    {"k2x3_s1x2_p1_batch1_nhwc", {1, 2, 5, 7}, 2, 3, 1, 2, 1, 1, false, kNHWC},
    {"k3s1p1_overlap", {2, 2, 5, 5}, 3, 3, 1, 1, 1, 1, true, kNCHW},
};

class PoolGradcheck : public ::testing::TestWithParam<PoolCase> {};

TEST_P(PoolGradcheck, MaxPool) {
  const PoolCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = distinct_tensor(c.x, 41, c.fmt);
  const Tensor y = nan_tensor(c.y(), DType::f64, c.fmt);
  const Tensor cot = random_tensor(c.y(), DType::f64, 42, -1, 1, c.fmt);
  auto loss = [&] {
    ref.max_pool2d_fwd({x, y, c.params()});
    return dot(y, cot);
  };
  loss();
  const Tensor dx = nan_tensor(c.x, DType::f64, c.fmt);
  ref.max_pool2d_bwd({x, y, cot, dx, c.params()});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

TEST_P(PoolGradcheck, AvgPool) {
  const PoolCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = random_tensor(c.x, DType::f64, 43, -1, 1, c.fmt);
  const Tensor y = nan_tensor(c.y(), DType::f64, c.fmt);
  const Tensor cot = random_tensor(c.y(), DType::f64, 44, -1, 1, c.fmt);
  auto loss = [&] {
    ref.avg_pool2d_fwd({x, y, c.params()});
    return dot(y, cot);
  };
  const Tensor dx = nan_tensor(c.x, DType::f64, c.fmt);
  ref.avg_pool2d_bwd({cot, dx, c.params()});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

TEST_P(PoolGradcheck, GlobalAvgPool) {
  const PoolCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = random_tensor(c.x, DType::f64, 45, -1, 1, c.fmt);
  const Tensor y = nan_tensor({c.x[0], c.x[1]});
  const Tensor cot = random_tensor({c.x[0], c.x[1]}, DType::f64, 46);
  auto loss = [&] {
    ref.global_avg_pool_fwd({x, y});
    return dot(y, cot);
  };
  const Tensor dx = nan_tensor(c.x, DType::f64, c.fmt);
  ref.global_avg_pool_bwd({cot, dx});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

INSTANTIATE_TEST_SUITE_P(Reference, PoolGradcheck, ::testing::ValuesIn(kPoolCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReferencePool, MaxPoolValuesPaddingNeverWins) {
  ReferenceBackend ref;
  // All inputs negative: a zero-padded max would return 0 at the borders; -inf padding must not.
  const Tensor x = from_values({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 1, 3, 3});
  const Tensor y = nan_tensor({1, 1, 2, 2});
  ref.max_pool2d_fwd({x, y, square_pool(2, 2, 1)});
  // Windows (padded by one): {-1}, {-2,-3}, {-4,-7}, {-5,-6,-8,-9}.
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{-1, -2, -4, -5}));
}

TEST(ReferencePool, MaxPoolGradientGoesToFirstMaximum) {
  ReferenceBackend ref;
  // One 3x3 window, maximum 5 at (0,2), (1,1) and (2,0): the first in row-major order is (0,2).
  const Tensor x = from_values({1, 2, 5, 3, 5, 4, 5, 0, 1}, {1, 1, 3, 3}, DType::f64, kNHWC);
  const Tensor y = nan_tensor({1, 1, 1, 1});
  ref.max_pool2d_fwd({x, y, square_pool(3, 1, 0)});
  EXPECT_EQ(y.item(), 5.0);
  const Tensor dy = from_values({7}, {1, 1, 1, 1});
  const Tensor dx = nan_tensor({1, 1, 3, 3});
  ref.max_pool2d_bwd({x, y, dy, dx, square_pool(3, 1, 0)});
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{0, 0, 7, 0, 0, 0, 0, 0, 0}));

  // Overlapping windows (stride 1) that share their maximum accumulate its gradient.
  const Tensor x2 = from_values({0, 0, 0, 0, 9, 0, 0, 0, 0}, {1, 1, 3, 3});
  const Tensor y2 = nan_tensor({1, 1, 2, 2});
  ref.max_pool2d_fwd({x2, y2, square_pool(2, 1, 0)});
  const Tensor dy2 = from_values({1, 2, 3, 4}, {1, 1, 2, 2});
  const Tensor dx2 = nan_tensor({1, 1, 3, 3});
  ref.max_pool2d_bwd({x2, y2, dy2, dx2, square_pool(2, 1, 0)});
  EXPECT_EQ(dx2.to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
}

TEST(ReferencePool, AvgPoolCountIncludePadAsPyTorch) {
  ReferenceBackend ref;
  // torch.nn.functional.avg_pool2d(torch.ones(1,1,3,3), 3, 1, 1): corners 4/9, edges 6/9, centre 1.
  const Tensor x = from_values(std::vector<double>(9, 1.0), {1, 1, 3, 3});
  const Tensor y = nan_tensor({1, 1, 3, 3});
  ref.avg_pool2d_fwd({x, y, square_pool(3, 1, 1, true)});
  const double c = 4.0 / 9, e = 6.0 / 9;
  const std::vector<double> want{c, e, c, e, 1, e, c, e, c};
  const auto got = y.to_vector<double>();
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << i;
  // count_include_pad=False: every window averages only real ones.
  ref.avg_pool2d_fwd({x, y, square_pool(3, 1, 1, false)});
  for (double v : y.to_vector<double>()) EXPECT_NEAR(v, 1.0, 1e-15);

  // With padding the divisor stays the full kernel area (windows partly in the
  // padding), 4x4 input, k3 s2 p1: window (0,0) covers rows/cols -1..1.
  const Tensor x4 = from_values(std::vector<double>(16, 1.0), {1, 1, 4, 4});
  const Tensor y4 = nan_tensor({1, 1, 2, 2});
  ref.avg_pool2d_fwd({x4, y4, square_pool(3, 2, 1, true)});
  // Window (0,0) covers rows/cols -1..1: 4 real ones / 9. Window (1,1) covers 1..3: 9/9.
  const auto g4 = y4.to_vector<double>();
  EXPECT_NEAR(g4[0], 4.0 / 9, 1e-15);
  EXPECT_NEAR(g4[1], 6.0 / 9, 1e-15);
  EXPECT_NEAR(g4[3], 1.0, 1e-15);

  // 5x5 input, k2 s2 p1: windows start at -1, 1, 3.
  const Tensor x5 = from_values(std::vector<double>(25, 1.0), {1, 1, 5, 5});
  const Tensor y5 = nan_tensor({1, 1, 3, 3});
  ref.avg_pool2d_fwd({x5, y5, square_pool(2, 2, 1, true)});
  const auto g5 = y5.to_vector<double>();
  EXPECT_NEAR(g5[0], 1.0 / 4, 1e-15);  // rows -1..0, cols -1..0
  EXPECT_NEAR(g5[1], 2.0 / 4, 1e-15);  // rows -1..0, cols 1..2
  EXPECT_NEAR(g5[4], 1.0, 1e-15);      // rows 1..2, cols 1..2
}

TEST(ReferencePool, GlobalAvgPoolValues) {
  ReferenceBackend ref;
  const Tensor x = from_values({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2}, DType::f64, kNHWC);
  const Tensor y = nan_tensor({1, 2});
  ref.global_avg_pool_fwd({x, y});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{2.5, 25}));
}

}  // namespace
}  // namespace strata::testing
