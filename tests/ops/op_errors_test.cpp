// Error paths of the front end: every op rejects wrong rank, mismatched sizes,
// dtype mismatch and device mismatch with a message naming op and argument.
#include <gtest/gtest.h>

#include "strata/autograd/functions.h"
#include "support/compare.h"
#include "support/op_fixtures.h"
#include "support/replicas.h"

namespace strata::testing {
namespace {

using ops::Conv2dParams;
using ops::Pool2dParams;

STRATA_COVERS(conv2d_fwd, "errors");
STRATA_COVERS(conv2d_bwd_data, "errors");
STRATA_COVERS(conv2d_bwd_weight, "errors");
STRATA_COVERS(conv2d_bwd_bias, "errors");
TEST(OpErrors, Conv2d) {
  auto d = reference_dispatch();
  Tensor x = rnd({2, 3, 8, 8}), w = rnd({4, 3, 3, 3}), b = rnd({4});
  Conv2dParams p;
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({3, 8, 8}), w, b, p), "conv2d", "input", "rank 4");
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({2, 5, 8, 8}), w, b, p), "conv2d", "5 channels", "expects 3", "[2,5,8,8]");
  EXPECT_STRATA_ERROR(ops::conv2d(d, x, w, rnd({5}), p), "conv2d", "bias", "[4]");
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({2, 3, 8, 8}, DType::f64), w, b, p), "conv2d", "dtype", "f64", "f32");
  EXPECT_STRATA_ERROR(ops::conv2d(d, fake_cuda({2, 3, 8, 8}), w, b, p), "conv2d", "cuda:0", "reference");
  Conv2dParams g;
  g.groups = 2;
  EXPECT_STRATA_ERROR(ops::conv2d(d, x, w, b, g), "conv2d", "groups=2");
  Conv2dParams s;
  s.stride_h = 0;
  EXPECT_STRATA_ERROR(ops::conv2d(d, x, w, b, s), "conv2d", "stride");
  EXPECT_STRATA_ERROR(ops::conv2d(d, rnd({1, 3, 2, 2}), w, b, p), "conv2d", "empty");
  EXPECT_STRATA_ERROR(ops::conv2d_bwd_data(d, rnd({2, 4, 5, 5}), w, x.sizes(), p), "conv2d_bwd_data", "grad_output");
  EXPECT_STRATA_ERROR(ops::conv2d_bwd_weight(d, x, rnd({2, 4, 5, 5}), w.sizes(), p), "conv2d_bwd_weight",
                      "grad_output");
  EXPECT_STRATA_ERROR(ops::conv2d_bwd_bias(d, rnd({2, 4})), "conv2d_bwd_bias", "rank 4");
  EXPECT_STRATA_ERROR(ops::conv2d_bwd_bias(d, fake_cuda({2, 4, 3, 3})), "conv2d_bwd_bias", "cuda:0");
}

// The inference epilogue's residual: the output's sizes and the input's dtype.
TEST(OpErrors, Conv2dEpilogue) {
  auto d = reference_dispatch();
  Tensor x = rnd({2, 3, 8, 8}), w = rnd({4, 3, 3, 3}), b = rnd({4});
  Conv2dParams p;  // output [2,4,6,6]
  EXPECT_STRATA_ERROR(ops::conv2d_fused(d, x, w, b, p, rnd({2, 4, 8, 8}), true), "conv2d", "residual", "[2,4,8,8]",
                      "[2,4,6,6]");
  EXPECT_STRATA_ERROR(ops::conv2d_fused(d, x, w, b, p, rnd({2, 4, 6, 6}, DType::f64), false), "conv2d", "residual",
                      "f64");
  EXPECT_STRATA_ERROR(ops::conv2d_fused(d, x, w, b, p, fake_cuda({2, 4, 6, 6}), false), "conv2d", "residual",
                      "cuda:0");
  // The output written over the residual: only where the backend accumulates in place.
  const Tensor z = rnd({2, 4, 6, 6}), z_before = Tensor::empty_like(z, z.sizes());
  copy_into(z, z_before);
  EXPECT_STRATA_ERROR(ops::conv2d_fused(d, x, w, b, p, z, true, nullptr, true), "conv2d", "residual",
                      "accumulates in place");
  EXPECT_TRUE(bitwise_equal(z, z_before)) << "a refused call wrote the residual";
}

STRATA_COVERS(batch_norm_fwd, "errors");
STRATA_COVERS(batch_norm_bwd, "errors");
TEST(OpErrors, BatchNorm) {
  auto d = reference_dispatch();
  Tensor x = rnd({2, 3, 4, 4}), c3 = rnd({3}), c4 = rnd({4});
  EXPECT_STRATA_ERROR(ops::batch_norm(d, rnd({2, 3, 4}), c3, c3, c3, c3, true, 0.1, 1e-5), "batch_norm", "[N,C]");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, x, c4, c3, c3, c3, true, 0.1, 1e-5), "batch_norm", "weight", "[3]");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, x, c3, c3, c3, rnd({3}, DType::f64), true, 0.1, 1e-5), "batch_norm",
                      "running_var", "dtype");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, fake_cuda({2, 3, 4, 4}), fake_cuda({3}), fake_cuda({3}), fake_cuda({3}),
                                      fake_cuda({3}), true, 0.1, 1e-5),
                      "batch_norm", "cuda:0");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, rnd({1, 3}), c3, c3, c3, c3, true, 0.1, 1e-5), "batch_norm",
                      "more than one value");
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, rnd({2, 3, 4, 5}), c3, c3, c3, true), "batch_norm_bwd", "shape");
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, rnd({2, 3, 4, 4}), c4, c3, c3, true), "batch_norm_bwd", "weight");
  // bf16 input: parameters and statistics stay f32 (mixed precision), and the
  // reference backend has no bf16 batch norm at all.
  const Tensor xb = rnd({2, 3, 4, 4}, DType::bf16), b3 = rnd({3}, DType::bf16);
  EXPECT_STRATA_ERROR(ops::batch_norm(d, xb, b3, c3, c3, c3, true, 0.1, 1e-5), "batch_norm", "weight", "dtype f32");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, xb, c3, c3, c3, c3, true, 0.1, 1e-5), "batch_norm", "reference",
                      "does not support bf16");
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, xb, xb, c3, b3, c3, true), "batch_norm_bwd", "save_mean", "dtype f32");
}

// Fused training: the ReLU mask is over the memory order of a dense input (relu_mask.h).
TEST(OpErrors, BatchNormFusedTraining) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3, 4, 4}), c3 = rnd({3});
  const Tensor strided = rnd({2, 3, 4, 8}).narrow(3, 0, 4);
  EXPECT_STRATA_ERROR(ops::batch_norm(d, strided, c3, c3, c3, c3, true, 0.1, 1e-5, Tensor(), true), "batch_norm",
                      "fused training", "dense");
  const Tensor z_nhwc = Tensor::empty(x.sizes(), DType::f32, Device::cpu(), MemoryFormat::channels_last);
  EXPECT_STRATA_ERROR(ops::batch_norm(d, x, c3, c3, c3, c3, true, 0.1, 1e-5, z_nhwc, true), "batch_norm",
                      "residual", "layout");
  const ops::BatchNormOut o = ops::batch_norm(d, x, c3, c3, c3, c3, true, 0.1, 1e-5, Tensor(), true);
  ASSERT_TRUE(o.relu_mask.defined());
  EXPECT_EQ(o.relu_mask.numel(), 12);  // 96 values, 8 a byte
  const Tensor dy = rnd({2, 3, 4, 4});
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, dy, c3, o.save_mean, o.save_invstd, true, rnd({12})),
                      "batch_norm_bwd", "relu_mask", "u8");
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, dy, c3, o.save_mean, o.save_invstd, true,
                                          Tensor::empty(Shape{11}, DType::u8)),
                      "batch_norm_bwd", "relu_mask", "[12]");
  const Tensor dy_nhwc = Tensor::empty(x.sizes(), DType::f32, Device::cpu(), MemoryFormat::channels_last);
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, dy_nhwc, c3, o.save_mean, o.save_invstd, true, o.relu_mask),
                      "batch_norm_bwd", "relu_mask", "one layout");
  // Fused evaluation has no backward: the autograd function says so with gradients on.
  const Tensor xg = rnd({2, 3, 4, 4}).set_requires_grad(true);
  EXPECT_STRATA_ERROR(autograd::batch_norm(d, xg, c3, c3, c3, c3, false, 0.1, 1e-5, Tensor(), true), "batch_norm",
                      "fused evaluation", "gradients off");
}

// Synchronised batch norm (op_args.h: sync) is for training; a group of one replica is
// plain batch norm, whose limits hold.
TEST(OpErrors, BatchNormSync) {
  auto d = reference_dispatch();
  const Tensor x = rnd({2, 3, 4, 4}), c3 = rnd({3}), rv = random_tensor({3}, DType::f32, 3, 0.5, 2.0);
  CountingGroup two(2), one(1);
  EXPECT_STRATA_ERROR(ops::batch_norm(d, x, c3, c3, c3, rv, false, 0.1, 1e-5, Tensor(), false, &two), "batch_norm",
                      "sync", "training");
  const ops::BatchNormOut o = ops::batch_norm(d, x, c3, c3, c3, rv, false, 0.1, 1e-5);
  EXPECT_STRATA_ERROR(ops::batch_norm_bwd(d, x, x, c3, o.save_mean, o.save_invstd, false, Tensor(), false, &two),
                      "batch_norm_bwd", "sync", "training");
  EXPECT_STRATA_ERROR(ops::batch_norm(d, rnd({1, 3}), c3, c3, c3, rv, true, 0.1, 1e-5, Tensor(), false, &one),
                      "batch_norm", "more than one value per channel");
  EXPECT_EQ(two.calls + one.calls, 0);
}

STRATA_COVERS(relu_fwd, "errors");
STRATA_COVERS(relu_bwd, "errors");
STRATA_COVERS(add, "errors");
STRATA_COVERS(scale, "errors");
STRATA_COVERS(axpy, "errors");
TEST(OpErrors, Elementwise) {
  auto d = reference_dispatch();
  EXPECT_STRATA_ERROR(ops::relu(d, Tensor::empty({3}, DType::i64)), "relu_fwd", "i64");
  EXPECT_STRATA_ERROR(ops::relu(d, fake_cuda({3})), "relu_fwd", "cuda:0");
  EXPECT_STRATA_ERROR(ops::relu_bwd(d, rnd({3}), rnd({4})), "relu_bwd", "shape", "[3]", "[4]");
  EXPECT_STRATA_ERROR(ops::relu_bwd(d, rnd({3}), rnd({3}, DType::f64)), "relu_bwd", "dtype");
  EXPECT_STRATA_ERROR(ops::add(d, rnd({2, 3}), rnd({3, 2})), "add", "shape mismatch", "[2,3]", "[3,2]");
  EXPECT_STRATA_ERROR(ops::add(d, rnd({3}), rnd({3}, DType::f64)), "add", "dtype");
  EXPECT_STRATA_ERROR(ops::add(d, fake_cuda({3}), fake_cuda({3})), "add", "cuda:0");
  EXPECT_STRATA_ERROR(ops::scale(d, fake_cuda({3}), 2.0), "scale", "cuda:0");
  EXPECT_STRATA_ERROR(ops::scale(d, Tensor::empty({3}, DType::u8), 2.0), "scale", "u8");
  EXPECT_STRATA_ERROR(ops::axpy_(d, rnd({3}), rnd({4}), 1.0), "axpy", "shape");
  EXPECT_STRATA_ERROR(ops::axpy_(d, rnd({3}), rnd({3}, DType::f64), 1.0), "axpy", "dtype");
}

STRATA_COVERS(max_pool2d_fwd, "errors");
STRATA_COVERS(max_pool2d_bwd, "errors");
STRATA_COVERS(avg_pool2d_fwd, "errors");
STRATA_COVERS(avg_pool2d_bwd, "errors");
STRATA_COVERS(global_avg_pool_fwd, "errors");
STRATA_COVERS(global_avg_pool_bwd, "errors");
TEST(OpErrors, Pooling) {
  auto d = reference_dispatch();
  Pool2dParams p;
  EXPECT_STRATA_ERROR(ops::max_pool2d(d, rnd({3, 8, 8}), p), "max_pool2d", "rank 4");
  EXPECT_STRATA_ERROR(ops::max_pool2d(d, fake_cuda({1, 3, 8, 8}), p), "max_pool2d", "cuda:0");
  Pool2dParams big;
  big.pad_h = 2;
  EXPECT_STRATA_ERROR(ops::max_pool2d(d, rnd({1, 3, 8, 8}), big), "max_pool2d", "padding");
  EXPECT_STRATA_ERROR(ops::max_pool2d(d, rnd({1, 3, 1, 1}), p), "max_pool2d", "empty");
  Tensor x = rnd({1, 3, 8, 8});
  EXPECT_STRATA_ERROR(ops::max_pool2d_bwd(d, x, rnd({1, 3, 4, 4}), rnd({1, 3, 3, 4}), p), "max_pool2d_bwd",
                      "grad_output");
  EXPECT_STRATA_ERROR(ops::avg_pool2d(d, Tensor::empty({1, 3, 8, 8}, DType::i32), p), "avg_pool2d", "floating");
  EXPECT_STRATA_ERROR(ops::avg_pool2d_bwd(d, rnd({1, 3, 5, 4}), x, p), "avg_pool2d_bwd", "grad_output");
  EXPECT_STRATA_ERROR(ops::global_avg_pool(d, rnd({3, 8})), "global_avg_pool", "rank 4");
  EXPECT_STRATA_ERROR(ops::global_avg_pool(d, fake_cuda({1, 3, 2, 2})), "global_avg_pool", "cuda:0");
  EXPECT_STRATA_ERROR(ops::global_avg_pool_bwd(d, rnd({1, 4}), x), "global_avg_pool_bwd", "grad_output");
}

STRATA_COVERS(space_to_depth_fwd, "errors");
STRATA_COVERS(space_to_depth_bwd, "errors");
TEST(OpErrors, SpaceToDepth) {
  auto d = reference_dispatch();
  ops::SpaceToDepthParams p;
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({3, 8, 8}), p), "space_to_depth", "rank 4");
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, fake_cuda({1, 3, 8, 8}), p), "space_to_depth", "cuda:0");
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({1, 3, 0, 8}), p), "space_to_depth", "empty");
  ops::SpaceToDepthParams bad = p;
  bad.block = 0;
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({1, 3, 8, 8}), bad), "space_to_depth", "block");
  bad = p;
  bad.pad_w = -1;
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({1, 3, 8, 8}), bad), "space_to_depth", "padding");
  bad = p;
  bad.channels = 11;  // 2 * 2 * 3 = 12 needed
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({1, 3, 8, 8}), bad), "space_to_depth", "at least");
  bad = p;
  bad.out_h = -2;
  EXPECT_STRATA_ERROR(ops::space_to_depth(d, rnd({1, 3, 8, 8}), bad), "space_to_depth", "positive");
  // The defaults: 12 channels, ceil(8 / 2) = 4 blocks each way.
  EXPECT_EQ(ops::space_to_depth(d, rnd({1, 3, 8, 8}), p).sizes(), (Shape{1, 12, 4, 4}));
  const Tensor x = rnd({1, 3, 8, 8});
  EXPECT_STRATA_ERROR(ops::space_to_depth_bwd(d, rnd({1, 12, 4, 5}), x, p), "space_to_depth_bwd", "grad_output");
  EXPECT_STRATA_ERROR(ops::space_to_depth_bwd(d, Tensor(), x, p), "space_to_depth_bwd", "grad_output");
}

}  // namespace
}  // namespace strata::testing
