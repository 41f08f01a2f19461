// conv2d on the reference backend: forward values against an independent loop
// and hand-worked examples; all three backward ops against central differences.
#include <gtest/gtest.h>

#include "reference_test_util.h"
#include "support/coverage.h"

namespace strata::testing {
namespace {

STRATA_COVERS(conv2d_fwd, "gradcheck");
STRATA_COVERS(conv2d_fwd, "values");
STRATA_COVERS(conv2d_bwd_data, "gradcheck");
STRATA_COVERS(conv2d_bwd_weight, "gradcheck");
STRATA_COVERS(conv2d_bwd_bias, "gradcheck");

struct ConvCase {
  const char* name;
  Shape x;  // [N,C,H,W]
  int64_t k, r, s;
  Conv2dParams p;
  bool bias;
  MemoryFormat fmt;
};

int64_t out_size(int64_t in, int64_t k, int stride, int pad, int dil) {
  return (in + 2 * pad - dil * (k - 1) - 1) / stride + 1;
}
Shape out_shape(const ConvCase& c) {
  return {c.x[0], c.k, out_size(c.x[2], c.r, c.p.stride_h, c.p.pad_h, c.p.dilation_h),
          out_size(c.x[3], c.s, c.p.stride_w, c.p.pad_w, c.p.dilation_w)};
}
Shape weight_shape(const ConvCase& c) { return {c.k, c.x[1] / c.p.groups, c.r, c.s}; }

Conv2dParams params(int sh, int sw, int ph, int pw, int dh, int dw, int groups) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh, p.dilation_w = dw;
  p.groups = groups;
  return p;
}

// Shapes chosen to hit batch 1, odd sizes, stride 2, padding, dilation 2, groups
// (2, depthwise, depthwise with multiplier), non-square kernels, 1x1, and NHWC.
const ConvCase kCases[] = {
    {"batch1_pad1_3x3", {1, 3, 7, 5}, 4, 3, 3, params(1, 1, 1, 1, 1, 1, 1), true, kNCHW},
    {"stride2_groups2_3x2_nhwc", {2, 4, 7, 5}, 6, 3, 2, params(2, 2, 1, 0, 1, 1, 2), true, kNHWC},
    {"depthwise_dilation2", {2, 3, 7, 6}, 3, 3, 3, params(1, 1, 2, 2, 2, 2, 3), false, kNCHW},
    {"mixed_stride_dilation_nhwc", {1, 2, 5, 7}, 4, 2, 3, params(2, 1, 0, 1, 2, 1, 2), true, kNHWC},
    {"pointwise_stride2", {2, 4, 6, 6}, 3, 1, 1, params(2, 2, 0, 0, 1, 1, 1), false, kNCHW},
    {"depthwise_multiplier_nhwc", {2, 2, 5, 5}, 4, 3, 3, params(2, 2, 1, 1, 1, 1, 2), true, kNHWC},
    {"dilation2_stride2_pad2_1x3", {1, 3, 7, 7}, 2, 1, 3, params(2, 2, 0, 2, 1, 2, 1), true, kNHWC},
};

class ConvGradcheck : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvGradcheck, AllInputsMatchCentralDifferences) {
  const ConvCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = random_tensor(c.x, DType::f64, 1, -1, 1, c.fmt);
  const Tensor w = random_tensor(weight_shape(c), DType::f64, 2, -1, 1, c.fmt);
  const Tensor b = c.bias ? random_tensor({c.k}, DType::f64, 3) : Tensor();
  const Shape ys = out_shape(c);
  const Tensor y = nan_tensor(ys, DType::f64, c.fmt);
  const Tensor cot = random_tensor(ys, DType::f64, 4, -1, 1, c.fmt);  // the cotangent R
  auto loss = [&] {
    ref.conv2d_fwd({x, w, b, y, c.p});
    return dot(y, cot);
  };

  const Tensor dx = nan_tensor(c.x, DType::f64, c.fmt);
  const Tensor dw = nan_tensor(weight_shape(c), DType::f64, c.fmt);
  ref.conv2d_bwd_data({cot, w, dx, c.p});
  ref.conv2d_bwd_weight({x, cot, dw, c.p});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
  EXPECT_TRUE(grad_matches("dw", dw, numeric_grad(w, loss)));
  if (c.bias) {
    const Tensor db = nan_tensor({c.k});
    ref.conv2d_bwd_bias({cot, db});
    EXPECT_TRUE(grad_matches("db", db, numeric_grad(b, loss)));
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, ConvGradcheck, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// An independent forward: contiguous host vectors, PyTorch's definition written out.
std::vector<double> naive_conv(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto bv = b.defined() ? b.to_vector<double>() : std::vector<double>(c.k, 0.0);
  const Shape ys = out_shape(c);
  const int64_t N = c.x[0], C = c.x[1], H = c.x[2], W = c.x[3], G = c.p.groups;
  const int64_t Cg = C / G, Kg = c.k / G;
  std::vector<double> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t i = 0; i < ys[2]; ++i)
        for (int64_t j = 0; j < ys[3]; ++j) {
          double acc = bv[k];
          const int64_t g = k / Kg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t r = 0; r < c.r; ++r)
              for (int64_t s = 0; s < c.s; ++s) {
                const int64_t h = i * c.p.stride_h - c.p.pad_h + r * c.p.dilation_h;
                const int64_t ww = j * c.p.stride_w - c.p.pad_w + s * c.p.dilation_w;
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += xv[((n * C + g * Cg + ci) * H + h) * W + ww] * wv[((k * Cg + ci) * c.r + r) * c.s + s];
              }
          y.push_back(acc);
        }
  return y;
}

TEST_P(ConvGradcheck, ForwardMatchesIndependentLoopAndLayoutsAgree) {
  const ConvCase& c = GetParam();
  ReferenceBackend ref;
  const Tensor x = random_tensor(c.x, DType::f64, 11, -1, 1, c.fmt);
  const Tensor w = random_tensor(weight_shape(c), DType::f64, 12);
  const Tensor b = c.bias ? random_tensor({c.k}, DType::f64, 13) : Tensor();
  const Shape ys = out_shape(c);
  const Tensor y = nan_tensor(ys, DType::f64, c.fmt);
  ref.conv2d_fwd({x, w, b, y, c.p});
  EXPECT_TRUE(close(y, Tensor::from_vector(naive_conv(c, x, w, b), ys), 1e-14));

  // The other memory format for x and y gives the same values, bitwise.
  const MemoryFormat other = c.fmt == kNCHW ? kNHWC : kNCHW;
  const Tensor y2 = nan_tensor(ys, DType::f64, other);
  ref.conv2d_fwd({x.contiguous(other), w.contiguous(other), b, y2, c.p});
  EXPECT_TRUE(bitwise_equal(y, y2));
}

TEST(ReferenceConv, HandWorkedExamples) {
  ReferenceBackend ref;
  // x = 1..9 in 3x3, w = [[1,0],[0,-1]]: every output is x[i,j] - x[i+1,j+1] = -4, plus bias.
  const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  const Tensor w = from_values({1, 0, 0, -1}, {1, 1, 2, 2});
  const Tensor b = from_values({0.5}, {1});
  const Tensor y = nan_tensor({1, 1, 2, 2});
  ref.conv2d_fwd({x, w, b, y, Conv2dParams{}});
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{-3.5, -3.5, -3.5, -3.5}));

  // 2x2 ones, 3x3 ones kernel, padding 1: each output counts its in-bounds taps (4).
  const Tensor ones = from_values({1, 1, 1, 1}, {1, 1, 2, 2});
  const Tensor w3 = from_values(std::vector<double>(9, 1.0), {1, 1, 3, 3});
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  const Tensor y2 = nan_tensor({1, 1, 2, 2});
  ref.conv2d_fwd({ones, w3, Tensor(), y2, p});
  EXPECT_EQ(y2.to_vector<double>(), (std::vector<double>{4, 4, 4, 4}));

  // Dilation 2 on a 1x5 row with a 1x2 kernel [1, 10]: y[j] = x[j] + 10 x[j+2].
  const Tensor row = from_values({1, 2, 3, 4, 5}, {1, 1, 1, 5});
  const Tensor wd = from_values({1, 10}, {1, 1, 1, 2});
  Conv2dParams pd;
  pd.dilation_w = 2;
  const Tensor y3 = nan_tensor({1, 1, 1, 3});
  ref.conv2d_fwd({row, wd, Tensor(), y3, pd});
  EXPECT_EQ(y3.to_vector<double>(), (std::vector<double>{31, 42, 53}));

  // groups = 2: channel 0 only sees weight 0, channel 1 only weight 1.
  const Tensor xg = from_values({1, 2}, {1, 2, 1, 1});
  const Tensor wg = from_values({3, 5}, {2, 1, 1, 1});
  Conv2dParams pg;
  pg.groups = 2;
  const Tensor yg = nan_tensor({1, 2, 1, 1});
  ref.conv2d_fwd({xg, wg, Tensor(), yg, pg});
  EXPECT_EQ(yg.to_vector<double>(), (std::vector<double>{3, 10}));
}

}  // namespace
}  // namespace strata::testing
