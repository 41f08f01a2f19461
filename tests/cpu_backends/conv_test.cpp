// conv2d forward, backward data, backward weight and backward bias on each CPU
// backend against the reference: small shapes that exercise batch 1, odd sizes,
// stride, padding, dilation, groups, 1x1 paths, NHWC and strided views, and the
// real layer shapes of ResNet-50 at small resolution. Tolerance kTolGemm (1e-5).
#include <string>

#include "cpu_backend_test_util.h"

namespace strata::testing {
namespace {

STRATA_COVERS(conv2d_fwd, "vs_reference");
STRATA_COVERS(conv2d_bwd_data, "vs_reference");
STRATA_COVERS(conv2d_bwd_weight, "vs_reference");
STRATA_COVERS(conv2d_bwd_bias, "vs_reference");

Conv2dParams P(int sh, int sw, int ph, int pw, int dh = 1, int dw = 1, int g = 1) {
  Conv2dParams p;
  p.stride_h = sh, p.stride_w = sw, p.pad_h = ph, p.pad_w = pw, p.dilation_h = dh, p.dilation_w = dw, p.groups = g;
  return p;
}

struct ConvCase {
  std::string name;
  Shape x;  // [N, C, H, W]
  int64_t k, r, s;
  Conv2dParams p;
  MemoryFormat fmt = kNCHW;  // of x, w, y, dy, dx
  bool bias = true;
  bool strided_views = false;  // x, dy, y, dx, dw as channel slices of larger tensors
};

Shape out_shape(const ConvCase& c) {
  const int64_t ho = (c.x[2] + 2 * c.p.pad_h - c.p.dilation_h * (c.r - 1) - 1) / c.p.stride_h + 1;
  const int64_t wo = (c.x[3] + 2 * c.p.pad_w - c.p.dilation_w * (c.s - 1) - 1) / c.p.stride_w + 1;
  return {c.x[0], c.k, ho, wo};
}

// A random tensor of `sizes`, or a channel slice of a larger one when `strided`.
Tensor input(const Shape& sizes, uint64_t seed, MemoryFormat fmt, bool strided) {
  if (!strided) return rand_f32(sizes, seed, fmt);
  const Shape big{sizes[0], sizes[1] + 3, sizes[2], sizes[3]};
  return rand_f32(big, seed, fmt).narrow(1, 2, sizes[1]);
}
Tensor output(const Shape& sizes, MemoryFormat fmt, bool strided) {
  if (!strided) return nan_tensor(sizes, fmt);
  const Shape big{sizes[0], sizes[1] + 3, sizes[2], sizes[3]};
  return nan_tensor(big, fmt).narrow(1, 1, sizes[1]);
}

void check_conv(Backend& be, ReferenceBackend& ref, const ConvCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  const Shape ys = out_shape(c);
  const Shape ws{c.k, c.x[1] / c.p.groups, c.r, c.s};
  const Tensor x = input(c.x, seed, c.fmt, c.strided_views);
  const Tensor w = input(ws, seed + 1, c.fmt, c.strided_views);
  const Tensor b = c.bias ? rand_f32({c.k}, seed + 2) : Tensor();
  const Tensor dy = input(ys, seed + 3, c.fmt, c.strided_views);

  const Tensor y = output(ys, c.fmt, c.strided_views), y_ref = output(ys, c.fmt, c.strided_views);
  be.conv2d_fwd({x, w, b, y, c.p});
  ref.conv2d_fwd({x, w, b, y_ref, c.p});
  STRATA_EXPECT_CLOSE(y, y_ref, kTolGemm, "conv2d_fwd");

  const Tensor dx = output(c.x, c.fmt, c.strided_views), dx_ref = output(c.x, c.fmt, c.strided_views);
  be.conv2d_bwd_data({dy, w, dx, c.p});
  ref.conv2d_bwd_data({dy, w, dx_ref, c.p});
  STRATA_EXPECT_CLOSE(dx, dx_ref, kTolGemm, "conv2d_bwd_data");

  const Tensor dw = output(ws, c.fmt, c.strided_views), dw_ref = output(ws, c.fmt, c.strided_views);
  be.conv2d_bwd_weight({x, dy, dw, c.p});
  ref.conv2d_bwd_weight({x, dy, dw_ref, c.p});
  STRATA_EXPECT_CLOSE(dw, dw_ref, kTolGemm, "conv2d_bwd_weight");

  const Tensor db = nan_tensor({c.k}), db_ref = nan_tensor({c.k});
  be.conv2d_bwd_bias({dy, db});
  ref.conv2d_bwd_bias({dy, db_ref});
  STRATA_EXPECT_CLOSE(db, db_ref, kTolReduction, "conv2d_bwd_bias");
}

class ConvTest : public CpuBackendTest {};

TEST_P(ConvTest, SmallShapes) {
  const std::vector<ConvCase> cases = {
      {"batch1_odd_3x3_pad1", {1, 3, 7, 9}, 5, 3, 3, P(1, 1, 1, 1)},
      {"stride2_pad1", {2, 4, 9, 8}, 6, 3, 3, P(2, 2, 1, 1)},
      {"dilation2_pad2", {2, 3, 10, 11}, 4, 3, 3, P(1, 1, 2, 2, 2, 2)},
      {"groups2", {2, 4, 7, 7}, 6, 3, 3, P(1, 1, 1, 1, 1, 1, 2)},
      {"depthwise_stride2", {2, 4, 9, 9}, 4, 3, 3, P(2, 2, 1, 1, 1, 1, 4)},
      {"pointwise_1x1", {2, 8, 5, 6}, 5, 1, 1, P(1, 1, 0, 0)},
      {"pointwise_1x1_groups2_batch1", {1, 8, 5, 6}, 6, 1, 1, P(1, 1, 0, 0, 1, 1, 2)},
      {"pointwise_1x1_stride2_odd", {2, 8, 7, 5}, 5, 1, 1, P(2, 2, 0, 0)},
      {"rect_3x1_stride2x1", {2, 3, 8, 5}, 4, 3, 1, P(2, 1, 1, 0)},
      // Padding wider than the kernel's reach: output rows made of padding only.
      {"pointwise_1x1_pad2_stride2", {2, 4, 5, 6}, 3, 1, 1, P(2, 2, 2, 2)},
      {"nhwc_3x3_pad3_dilation2_stride3", {1, 8, 9, 7}, 4, 3, 3, P(3, 3, 3, 3, 2, 2), kNHWC},
      {"no_bias_5x5_pad2", {1, 2, 8, 8}, 3, 5, 5, P(1, 1, 2, 2), kNCHW, false},
      {"nhwc_3x3_pad1", {2, 8, 6, 5}, 8, 3, 3, P(1, 1, 1, 1), kNHWC},
      {"nhwc_stride2_groups2", {1, 8, 7, 7}, 8, 3, 3, P(2, 2, 1, 1, 1, 1, 2), kNHWC},
      {"nhwc_1x1", {2, 16, 4, 4}, 8, 1, 1, P(1, 1, 0, 0), kNHWC},
      {"strided_views_3x3", {2, 5, 6, 6}, 4, 3, 3, P(1, 1, 1, 1), kNCHW, true, true},
      {"strided_views_nhwc_1x1", {2, 5, 4, 3}, 6, 1, 1, P(1, 1, 0, 0), kNHWC, true, true},
      // Output planes of 1024+ pixels: openblas runs one image per GEMM (smaller
      // planes put several images side by side), in blocks of rows when C*R*S is
      // large (here two blocks).
      {"large_plane_3x3_batch2", {2, 3, 32, 33}, 4, 3, 3, P(1, 1, 1, 1)},
      {"large_plane_row_blocks", {2, 128, 32, 33}, 4, 3, 3, P(1, 1, 1, 1)},
      {"large_plane_1x1_batch2_groups", {2, 4, 33, 34}, 4, 1, 1, P(1, 1, 0, 0, 1, 1, 2)},
  };
  uint64_t seed = 100;
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
}

TEST_P(ConvTest, ResNet50LayerShapes) {
  const std::vector<ConvCase> cases = {
      {"stem_7x7_s2_3to64", {1, 3, 32, 32}, 64, 7, 7, P(2, 2, 3, 3), kNCHW, false},
      {"bottleneck_1x1_64to256", {2, 64, 8, 8}, 256, 1, 1, P(1, 1, 0, 0), kNCHW, false},
      {"bottleneck_3x3_128_s2", {2, 128, 8, 8}, 128, 3, 3, P(2, 2, 1, 1), kNCHW, false},
      {"downsample_1x1_s2_256to512", {2, 256, 8, 8}, 512, 1, 1, P(2, 2, 0, 0), kNCHW, false},
      {"bottleneck_3x3_64_nhwc", {2, 64, 8, 8}, 64, 3, 3, P(1, 1, 1, 1), kNHWC, false},
      {"stage4_1x1_2048to512", {2, 2048, 2, 2}, 512, 1, 1, P(1, 1, 0, 0), kNCHW, false},
  };
  uint64_t seed = 500;
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
}

// The inference epilogue (op_args.h): y = relu?(conv(x, w) + b + z) in one call, against
// the reference's separate conv, add and ReLU; the reference's own fused form is bitwise
// those. Covers batch 1, odd sizes, stride, padding, groups, NCHW and NHWC, no bias, and a
// residual in another layout than the output.
TEST_P(ConvTest, FusedEpilogue) {
  struct EpilogueCase {
    ConvCase conv;
    MemoryFormat z_fmt;
  };
  const std::vector<EpilogueCase> cases = {
      {{"batch1_odd_3x3_pad1", {1, 3, 7, 9}, 5, 3, 3, P(1, 1, 1, 1)}, kNCHW},
      {{"stride2_pad1", {2, 4, 9, 8}, 6, 3, 3, P(2, 2, 1, 1)}, kNCHW},
      {{"groups2_no_bias", {2, 4, 7, 7}, 6, 3, 3, P(1, 1, 1, 1, 1, 1, 2), kNCHW, false}, kNCHW},
      {{"nhwc_1x1_batch1", {1, 16, 5, 3}, 8, 1, 1, P(1, 1, 0, 0), kNHWC}, kNHWC},
      {{"nhwc_3x3_stride2_no_bias", {2, 8, 7, 7}, 16, 3, 3, P(2, 2, 1, 1), kNHWC, false}, kNHWC},
      {{"nhwc_residual_nchw", {2, 8, 6, 5}, 8, 3, 3, P(1, 1, 1, 1), kNHWC}, kNCHW},
      {{"nchw_residual_nhwc_1x1_s2", {2, 16, 9, 9}, 32, 1, 1, P(2, 2, 0, 0)}, kNHWC},
  };
  uint64_t seed = 900;
  for (const EpilogueCase& e : cases) {
    const ConvCase& c = e.conv;
    for (int variant = 0; variant < 3; ++variant) {
      const bool with_z = variant != 1, relu = variant != 2;
      SCOPED_TRACE(c.name + (with_z ? " +z" : "") + (relu ? " relu" : ""));
      const Shape ys = out_shape(c);
      const Tensor x = rand_f32(c.x, seed += 10, c.fmt);
      const Tensor w = rand_f32({c.k, c.x[1] / c.p.groups, c.r, c.s}, seed + 1, c.fmt);
      const Tensor b = c.bias ? rand_f32({c.k}, seed + 2) : Tensor();
      const Tensor z = rand_f32(ys, seed + 3, e.z_fmt);
      // The separate ops on the reference.
      const Tensor conv = nan_tensor(ys, c.fmt), sum = nan_tensor(ys, c.fmt), act = nan_tensor(ys, c.fmt);
      ref_.conv2d_fwd({x, w, b, conv, c.p});
      Tensor want = conv;
      if (with_z) ref_.add({want, z, sum}), want = sum;
      if (relu) ref_.relu_fwd({want, act}), want = act;
      ops::Conv2dFwdArgs f{x, w, b, Tensor(), c.p};
      f.z = with_z ? ops::TensorView(z) : ops::TensorView();
      f.relu = relu;
      const Tensor y = nan_tensor(ys, c.fmt), y_ref = nan_tensor(ys, c.fmt);
      f.y = y_ref;
      ref_.conv2d_fwd(f);
      EXPECT_TRUE(bitwise_equal(y_ref, want)) << "[reference fused vs separate]";
      f.y = y;
      be().conv2d_fwd(f);
      STRATA_EXPECT_CLOSE(y, want, kTolGemm, "conv2d_fwd fused");
    }
  }
  // Twice through the same planned call (a backend's cached plan rebinds z and y).
  const ConvCase c{"again", {1, 8, 5, 5}, 8, 3, 3, P(1, 1, 1, 1), kNHWC};
  const Tensor x = rand_f32(c.x, 970, kNHWC), w = rand_f32({8, 8, 3, 3}, 971, kNHWC), b = rand_f32({8}, 972);
  for (int i = 0; i < 2; ++i) {
    const Tensor z = rand_f32({1, 8, 5, 5}, 973 + i, kNHWC);
    ops::Conv2dFwdArgs f{x, w, b, Tensor(), c.p};
    f.z = z;
    f.relu = true;
    const Tensor y = nan_tensor({1, 8, 5, 5}, kNHWC), y_ref = nan_tensor({1, 8, 5, 5}, kNHWC);
    f.y = y;
    be().conv2d_fwd(f);
    f.y = y_ref;
    ref_.conv2d_fwd(f);
    STRATA_EXPECT_CLOSE(y, y_ref, kTolGemm, "conv2d_fwd fused, second call");
  }
}

// Capabilities::accumulates_residual_in_place: y given as the residual z itself (the same
// view) adds the convolution to it, as the separate ops with y apart would; versioned
// weights too (folded inference), both layouts, batch 1, stride and padding. A backend
// without the capability is asked nothing (ops::conv2d_fused refuses it: tests/ops).
TEST_P(ConvTest, ResidualAccumulatedInPlace) {
  if (!be().capabilities().accumulates_residual_in_place())
    GTEST_SKIP() << GetParam() << " does not accumulate in place";
  const std::vector<ConvCase> cases = {
      {"1x1_nhwc_batch1", {1, 64, 5, 5}, 32, 1, 1, P(1, 1, 0, 0), kNHWC},
      {"3x3_nhwc_odd", {2, 16, 7, 9}, 16, 3, 3, P(1, 1, 1, 1), kNHWC},
      {"1x1_stride2_nhwc", {2, 32, 8, 6}, 48, 1, 1, P(2, 2, 0, 0), kNHWC},
      {"3x3_nchw_stride2", {2, 8, 9, 9}, 16, 3, 3, P(2, 2, 1, 1)},
  };
  uint64_t seed = 1300;
  for (const ConvCase& c : cases)
    for (bool versioned : {false, true}) {
      SCOPED_TRACE(c.name + (versioned ? " versioned" : ""));
      const Shape ys = out_shape(c);
      const Tensor x = rand_f32(c.x, seed += 10, c.fmt), w = rand_f32({c.k, c.x[1], c.r, c.s}, seed + 1, c.fmt);
      const Tensor b = rand_f32({c.k}, seed + 2), z = rand_f32(ys, seed + 3, c.fmt);
      const uint64_t version = 3;
      ops::Conv2dFwdArgs f{x, w, b, nan_tensor(ys, c.fmt), c.p};
      f.relu = true;
      f.w_version = versioned ? &version : nullptr;
      const Tensor want = nan_tensor(ys, c.fmt);
      f.z = z;
      f.y = want;
      ref_.conv2d_fwd(f);
      const Tensor zy = Tensor::empty(ys, DType::f32, Device::cpu(), c.fmt);
      copy_into(z, zy);
      f.z = zy;
      f.y = zy;
      be().conv2d_fwd(f);
      STRATA_EXPECT_CLOSE(zy, want, kTolGemm, "conv2d_fwd with y = z");
      copy_into(z, zy);  // again through the same plan
      be().conv2d_fwd(f);
      STRATA_EXPECT_CLOSE(zy, want, kTolGemm, "conv2d_fwd with y = z, second call");
    }
}

// Conv2dFwdArgs::w_version: with the same weight buffer and version a backend may reuse
// the weights it re-laid out at an earlier call; a new version must be read anew. onednn
// keeps them (its weights reordered into the primitive's layout), which the stale read
// below shows; every backend reads new weights under a new version. Layouts where
// oneDNN re-lays weights out: 3x3 and 1x1 with 16+ channels, NCHW and NHWC activations
// (on NHWC, onednn also picks its inference kernels for versioned weights, and runs a
// strided 1x1 convolution as a stride-1 one over the pixels it reads).
TEST_P(ConvTest, VersionedWeightsAreReadAnewWhenTheirVersionChanges) {
  const std::vector<ConvCase> cases = {
      {"3x3_nchw", {1, 16, 9, 9}, 32, 3, 3, P(1, 1, 1, 1)},
      {"3x3_stride2_nhwc", {2, 32, 9, 8}, 16, 3, 3, P(2, 2, 1, 1), kNHWC},
      {"1x1_nhwc_batch1", {1, 64, 5, 5}, 32, 1, 1, P(1, 1, 0, 0), kNHWC},
      // onednn's inference runs these as the stride-1 convolution of the pixels read, but
      // the odd sizes with two images (a view oneDNN refuses) as they are.
      {"1x1_stride2_nhwc_batch2", {2, 32, 8, 6}, 48, 1, 1, P(2, 2, 0, 0), kNHWC},
      {"1x1_stride2_nhwc_odd", {2, 32, 9, 8}, 48, 1, 1, P(2, 2, 0, 0), kNHWC},
      {"1x1_stride2_nhwc_batch1", {1, 64, 7, 7}, 16, 1, 1, P(2, 2, 0, 0), kNHWC},
      {"1x1_stride3x2_nhwc", {1, 16, 10, 7}, 32, 1, 1, P(3, 2, 0, 0), kNHWC},
  };
  uint64_t seed = 1000;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Shape ys = out_shape(c), ws{c.k, c.x[1], c.r, c.s};
    const Tensor x = rand_f32(c.x, seed += 10, c.fmt), b = rand_f32({c.k}, seed + 1);
    const Tensor w = rand_f32(ws, seed + 2, c.fmt);
    const Tensor w0 = Tensor::empty(ws, DType::f32, Device::cpu(), c.fmt);
    copy_into(w, w0);
    uint64_t version = 7;
    const auto run = [&](const Tensor& weights, const uint64_t* v) {
      ops::Conv2dFwdArgs f{x, weights, b, Tensor(), c.p};
      f.relu = true;
      f.w_version = v;
      const Tensor y = nan_tensor(ys, c.fmt);
      f.y = y;
      if (v)
        be().conv2d_fwd(f);
      else
        ref_.conv2d_fwd(f);
      return y;
    };
    const Tensor first = run(w, &version);
    STRATA_EXPECT_CLOSE(first, run(w0, nullptr), kTolGemm, "versioned weights, first call");
    copy_into(rand_f32(ws, seed + 3, c.fmt), w);  // new contents, same buffer and version
    const Tensor again = run(w, &version);
    if (GetParam() == "onednn") EXPECT_TRUE(bitwise_equal(again, first)) << "the kept weights were not used";
    version = 8;
    STRATA_EXPECT_CLOSE(run(w, &version), run(w, nullptr), kTolGemm, "a new version reads the new weights");
  }
}

STRATA_CPU_BACKEND_SUITE(ConvTest);

}  // namespace
}  // namespace strata::testing
