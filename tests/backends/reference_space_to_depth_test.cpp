// space_to_depth on the reference backend: values by hand, the backward against central
// differences in f64, and the identity the space-to-depth convolution rests on.
#include <gtest/gtest.h>

#include "reference_test_util.h"
#include "support/coverage.h"
#include "support/space_to_depth_cases.h"

namespace strata::testing {
namespace {

STRATA_COVERS(space_to_depth_fwd, "values");
STRATA_COVERS(space_to_depth_fwd, "gradcheck");
STRATA_COVERS(space_to_depth_bwd, "values");
STRATA_COVERS(space_to_depth_bwd, "gradcheck");

using ops::SpaceToDepthParams;

// A 3x3 image, padding 1, 2x2 blocks: slot (dy, dx) of block (i, j) holds x[2i+dy-1, 2j+dx-1].
TEST(ReferenceSpaceToDepth, ValuesByHand) {
  ReferenceBackend ref;
  for (const MemoryFormat fmt : {kNCHW, kNHWC}) {
    const Tensor x = from_values({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, DType::f64, fmt);
    const Tensor y = nan_tensor({1, 6, 2, 2}, DType::f64, fmt);
    ref.space_to_depth_fwd({x, y, s2d_params(2, 1, 6, 2, 2)});
    // Channels 4 and 5 are past block * block * C: zero.
    EXPECT_EQ(y.contiguous().to_vector<double>(),
              (std::vector<double>{0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9, 0, 0, 0, 0, 0, 0, 0, 0}));
    // The adjoint: each x element takes the gradient of the one position that holds it.
    const Tensor dy = from_values({0, 0, 0, 50, 0, 0, 40, 60, 0, 20, 0, 80, 10, 30, 70, 90, 1, 1, 1, 1, 1, 1, 1, 1},
                                  {1, 6, 2, 2}, DType::f64, fmt);
    const Tensor dx = nan_tensor({1, 1, 3, 3}, DType::f64, fmt);
    ref.space_to_depth_bwd({dy, dx, s2d_params(2, 1, 6, 2, 2)});
    EXPECT_EQ(dx.contiguous().to_vector<double>(), (std::vector<double>{10, 20, 30, 40, 50, 60, 70, 80, 90}));
  }
}

// Blocks that stop short of x: the rows and columns past them get no gradient.
TEST(ReferenceSpaceToDepth, PixelsPastTheBlocksGetZeroGradient) {
  ReferenceBackend ref;
  const Tensor dy = from_values({1, 2, 3, 4}, {1, 4, 1, 1});
  const Tensor dx = nan_tensor({1, 1, 3, 3});
  ref.space_to_depth_bwd({dy, dx, s2d_params(2, 0, 4, 1, 1)});
  EXPECT_EQ(dx.to_vector<double>(), (std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

struct S2dCase {
  const char* name;
  Shape x;
  MemoryFormat fmt;
  int block, pad;
  int64_t channels, out_h, out_w;  // as the op takes them (all > 0 here)
  bool strided;                    // x a non-dense view (every other column of a wider tensor)
};

const S2dCase kCases[] = {
    {"stem_like_nhwc", {1, 3, 7, 7}, kNHWC, 2, 3, 16, 6, 6, false},
    {"odd_block3_nchw", {2, 2, 5, 4}, kNCHW, 3, 1, 18, 2, 2, false},
    {"short_blocks_batch1", {1, 2, 5, 5}, kNCHW, 2, 0, 9, 2, 3, false},
    {"long_blocks_strided", {2, 3, 4, 3}, kNCHW, 2, 1, 12, 4, 3, true},
};

class SpaceToDepthGradcheck : public ::testing::TestWithParam<S2dCase> {};

TEST_P(SpaceToDepthGradcheck, BackwardMatchesCentralDifferences) {
  const S2dCase& c = GetParam();
  ReferenceBackend ref;
  Tensor x = random_tensor(c.x, DType::f64, 61, -1, 1, c.fmt);
  if (c.strided) {
    const Shape wide{c.x[0], c.x[1], c.x[2], 2 * c.x[3]};
    const Tensor base = random_tensor(wide, DType::f64, 62, -1, 1, c.fmt);
    x = base.as_strided(c.x, Shape{base.strides()[0], base.strides()[1], base.strides()[2], 2 * base.strides()[3]}, 0);
  }
  const SpaceToDepthParams p = s2d_params(c.block, c.pad, c.channels, c.out_h, c.out_w);
  const Shape ys{c.x[0], c.channels, c.out_h, c.out_w};
  const Tensor y = nan_tensor(ys, DType::f64, c.fmt);
  const Tensor cot = random_tensor(ys, DType::f64, 63, -1, 1, c.fmt);
  auto loss = [&] {
    ref.space_to_depth_fwd({x, y, p});
    return dot(y, cot);
  };
  const Tensor dx = nan_tensor(c.x, DType::f64, c.fmt);
  ref.space_to_depth_bwd({cot, dx, p});
  EXPECT_TRUE(grad_matches("dx", dx, numeric_grad(x, loss)));
}

INSTANTIATE_TEST_SUITE_P(Reference, SpaceToDepthGradcheck, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The identity nn::Conv2d's space-to-depth form rests on: a stride-2 7x7 convolution with
// padding 3 equals a stride-1 4x4 convolution over the padded 2x2 blocks, the weight
// rearranged as w'[o, (dy*2+dx)*C + c, a, b] = w[o, c, 2a+dy, 2b+dx] (zero past 7).
TEST(ReferenceSpaceToDepth, StrideTwoConvolutionIsAStrideOneConvolutionOverBlocks) {
  ReferenceBackend ref;
  const int64_t n = 2, c = 3, h = 11, w = 9, k = 4;
  const Tensor x = random_tensor({n, c, h, w}, DType::f64, 71);
  const Tensor wt = random_tensor({k, c, 7, 7}, DType::f64, 72);
  Conv2dParams cp;
  cp.stride_h = cp.stride_w = 2;
  cp.pad_h = cp.pad_w = 3;
  const int64_t ho = (h + 6 - 7) / 2 + 1, wo = (w + 6 - 7) / 2 + 1;
  const Tensor y = nan_tensor({n, k, ho, wo});
  ref.conv2d_fwd({x, wt, {}, y, cp});

  const Tensor blocks = nan_tensor({n, 16, ho + 3, wo + 3});
  ref.space_to_depth_fwd({x, blocks, s2d_params(2, 3, 16, ho + 3, wo + 3)});
  const std::vector<double> wv = wt.to_vector<double>();
  std::vector<double> wr(static_cast<size_t>(k * 16 * 4 * 4), 0.0);
  for (int64_t o = 0; o < k; ++o)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t u = 0; u < 7; ++u)
        for (int64_t v = 0; v < 7; ++v)
          wr[static_cast<size_t>(((o * 16 + ((u % 2) * 2 + v % 2) * c + ci) * 4 + u / 2) * 4 + v / 2)] =
              wv[static_cast<size_t>(((o * c + ci) * 7 + u) * 7 + v)];
  const Tensor y2 = nan_tensor({n, k, ho, wo});
  ref.conv2d_fwd({blocks, from_values(wr, {k, 16, 4, 4}), {}, y2, Conv2dParams{}});
  EXPECT_TRUE(close(y2, y, 1e-12));
}

}  // namespace
}  // namespace strata::testing
