// max, average and global average pooling and space_to_depth on the cuda backend
// against the reference, forward and backward, NCHW and NHWC, f32 and half types.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "support/pool_params.h"
#include "support/space_to_depth_cases.h"

namespace strata::testing {
namespace {

STRATA_COVERS(max_pool2d_fwd, "cuda_vs_reference");
STRATA_COVERS(max_pool2d_bwd, "cuda_vs_reference");
STRATA_COVERS(avg_pool2d_fwd, "cuda_vs_reference");
STRATA_COVERS(avg_pool2d_bwd, "cuda_vs_reference");
STRATA_COVERS(global_avg_pool_fwd, "cuda_vs_reference");
STRATA_COVERS(global_avg_pool_bwd, "cuda_vs_reference");
STRATA_COVERS(space_to_depth_fwd, "cuda_vs_reference");
STRATA_COVERS(space_to_depth_bwd, "cuda_vs_reference");

class CudaPool : public CudaTest {};

// ---- pooling ----------------------------------------------------------------------

void check_pool(CudaBackend& be, ReferenceBackend& ref, const Shape& xs, const Pool2dParams& p, MemoryFormat fmt,
                uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << xs.str() << " k" << p.kernel_h << " s" << p.stride_h << " p" << p.pad_h
                                    << (p.count_include_pad ? "" : " exclude_pad") << (fmt == kNHWC ? " nhwc" : ""));
  const Shape ys = pool_out(xs, p);
  const Pair x = rand_pair(xs, seed, fmt);
  const Pair y = nan_pair(ys, fmt);
  be.max_pool2d_fwd({x.gpu, y.gpu, p});
  ref.max_pool2d_fwd({x.cpu, y.cpu, p});
  EXPECT_TRUE(bitwise_equal(to_cpu(y.gpu), y.cpu)) << "max_pool2d_fwd";
  const Pair dy = rand_pair(ys, seed + 1, fmt), dx = nan_pair(xs, fmt);
  be.max_pool2d_bwd({x.gpu, y.gpu, dy.gpu, dx.gpu, p});
  ref.max_pool2d_bwd({x.cpu, y.cpu, dy.cpu, dx.cpu, p});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolElementwise, "max_pool2d_bwd");

  const Pair ya = nan_pair(ys, fmt);
  be.avg_pool2d_fwd({x.gpu, ya.gpu, p});
  ref.avg_pool2d_fwd({x.cpu, ya.cpu, p});
  STRATA_EXPECT_CLOSE(ya.gpu, ya.cpu, kTolReduction, "avg_pool2d_fwd");
  const Pair dxa = nan_pair(xs, fmt);
  be.avg_pool2d_bwd({dy.gpu, dxa.gpu, p});
  ref.avg_pool2d_bwd({dy.cpu, dxa.cpu, p});
  STRATA_EXPECT_CLOSE(dxa.gpu, dxa.cpu, kTolReduction, "avg_pool2d_bwd");
}

TEST_F(CudaPool, Pooling) {
  uint64_t seed = 1300;
  check_pool(be(), ref_, {2, 3, 8, 8}, square_pool(2, 2, 0), kNCHW, seed += 10);
  check_pool(be(), ref_, {1, 4, 9, 7}, square_pool(3, 2, 1), kNCHW, seed += 10);         // ResNet stem pool, odd
  check_pool(be(), ref_, {1, 4, 9, 7}, square_pool(3, 2, 1, false), kNCHW, seed += 10);  // exclude padding
  check_pool(be(), ref_, {2, 8, 7, 7}, square_pool(3, 1, 1), kNHWC, seed += 10);
  check_pool(be(), ref_, {2, 64, 112, 112}, square_pool(3, 2, 1), kNCHW, seed += 10);  // ResNet-50 maxpool
  check_pool(be(), ref_, {2, 64, 112, 112}, square_pool(3, 2, 1), kNHWC, seed += 10);
}

// Each [H,W] plane a random permutation of (k+1)/128, k < H*W <= 127: exact in bf16
// and f16, and without ties, so max pooling's backward has one winner per window.
Tensor distinct_planes(const Shape& xs, DType dt, uint64_t seed, MemoryFormat fmt) {
  const int64_t hw = xs[2] * xs[3];
  std::vector<double> v(static_cast<size_t>(xs.numel()));
  std::mt19937_64 rng(seed);
  for (int64_t plane = 0; plane < xs[0] * xs[1]; ++plane) {
    std::vector<int64_t> k(static_cast<size_t>(hw));
    std::iota(k.begin(), k.end(), 0);
    std::shuffle(k.begin(), k.end(), rng);
    for (int64_t i = 0; i < hw; ++i) v[static_cast<size_t>(plane * hw + i)] = static_cast<double>(k[i] + 1) / 128.0;
  }
  Tensor f = Tensor::from_vector(v, xs);
  Tensor out = Tensor::empty(xs, dt, Device::cpu(), fmt);
  copy_into(f, out);
  return out;
}

// f16 and bf16 pooling (bf16 max pooling is what a mixed-precision ResNet's stem
// runs), forward and max pooling's backward, in both layouts.
TEST_F(CudaPool, PoolingHalf) {
  const Pool2dParams p = square_pool(3, 2, 1);
  const Shape xs{2, 8, 9, 9}, ys = pool_out(xs, p);
  uint64_t seed = 1400;
  for (DType dt : {DType::f16, DType::bf16}) {
    for (MemoryFormat fmt : {kNCHW, kNHWC}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (fmt == kNHWC ? " nhwc" : " nchw"));
      ASSERT_TRUE(be().capabilities().supports(ops::OpId::max_pool2d_fwd, dt));
      ASSERT_TRUE(be().capabilities().supports(ops::OpId::max_pool2d_bwd, dt));
      const double tol = dt == DType::bf16 ? kTolBf16 : kTolF16;
      const Tensor xh = distinct_planes(xs, dt, seed += 10, fmt), dyh = random_tensor(ys, dt, seed += 10);
      Tensor x32 = Tensor::empty(xs, DType::f32, Device::cpu(), fmt), dy32 = Tensor::empty(ys);
      copy_into(xh, x32);
      copy_into(dyh, dy32);
      const Tensor xg = to_gpu(xh), y = gpu_nan(ys, fmt, dt), y_ref = cpu_nan(ys, fmt);
      be().max_pool2d_fwd({xg, y, p});
      ref_.max_pool2d_fwd({x32, y_ref, p});
      STRATA_EXPECT_CLOSE(y, y_ref, 0.0, "max_pool2d_fwd (exact)");
      const Tensor dx = gpu_nan(xs, fmt, dt), dx_ref = cpu_nan(xs, fmt);
      be().max_pool2d_bwd({xg, y, to_gpu(dyh), dx, p});
      ref_.max_pool2d_bwd({x32, y_ref, dy32, dx_ref, p});
      STRATA_EXPECT_CLOSE(dx, dx_ref, tol, "max_pool2d_bwd");
      const Tensor ya = gpu_nan(ys, fmt, dt), ya_ref = cpu_nan(ys, fmt);
      be().avg_pool2d_fwd({xg, ya, p});
      ref_.avg_pool2d_fwd({x32, ya_ref, p});
      STRATA_EXPECT_CLOSE(ya, ya_ref, tol, "avg_pool2d_fwd");
    }
  }
}

// Channels-last max pooling's backward runs strata's kernels: with values from {-1, -0.5,
// 0, 0.5, 1} every window has ties, and the gradient must go to the first maximum in
// row-major order as on the reference, bit for bit (the sums of such gradients are exact).
TEST_F(CudaPool, MaxPoolChannelsLastTiesGoToTheFirstMaximum) {
  uint64_t seed = 1450;
  const auto tied = [](const Shape& s, DType dt, uint64_t sd) {
    std::vector<double> v(static_cast<size_t>(s.numel()));
    std::mt19937_64 rng(sd);
    for (double& e : v) e = static_cast<double>(static_cast<int>(rng() % 5) - 2) / 2.0;
    Tensor out = Tensor::empty(s, dt, Device::cpu(), kNHWC);
    copy_into(Tensor::from_vector(v, s), out);
    return out;
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (const Pool2dParams& p : {square_pool(3, 2, 1), square_pool(3, 1, 1), square_pool(2, 2, 0)}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " k" << p.kernel_h << " s" << p.stride_h);
      const Shape xs{2, 16, 9, 9}, ys = pool_out(xs, p);
      const Tensor xh = tied(xs, dt, seed += 10), dyh = tied(ys, dt, seed + 1);
      const Tensor x32 = f32_of(xh), dy32 = f32_of(dyh), y_ref = cpu_nan(ys, kNHWC), dx_ref = cpu_nan(xs, kNHWC);
      ref_.max_pool2d_fwd({x32, y_ref, p});
      ref_.max_pool2d_bwd({x32, y_ref, dy32, dx_ref, p});
      const Tensor xg = to_gpu(xh), dyg = to_gpu(dyh), y = gpu_nan(ys, kNHWC, dt), dx = gpu_nan(xs, kNHWC, dt);
      be().max_pool2d_fwd({xg, y, p});
      be().max_pool2d_bwd({xg, y, dyg, dx, p});
      EXPECT_TRUE(bitwise_equal(f32_of(to_cpu(dx)), dx_ref)) << "max_pool2d_bwd";
    }
}

// The channels-last forward against the reference: NaN propagates from any window position
// (cuDNN need not keep its payload), borders and padding of odd sizes, strides 1, 2 and 3,
// kernels 3 and 2, channel counts on and off a 16-byte vector, f32 and bf16 exactly.
TEST_F(CudaPool, MaxPoolChannelsLastForward) {
  struct Case {
    Shape x;
    Pool2dParams p;
  };
  const std::vector<Case> cases = {{{2, 16, 9, 11}, square_pool(3, 2, 1)}, {{1, 8, 7, 7}, square_pool(3, 1, 1)},
                                   {{3, 24, 10, 8}, square_pool(3, 3, 0)}, {{1, 16, 6, 6}, square_pool(2, 2, 0)},
                                   {{2, 6, 9, 9}, square_pool(3, 2, 1)}};
  uint64_t seed = 1600;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + c.x.str() + " k" + std::to_string(c.p.kernel_h) + " s" +
                   std::to_string(c.p.stride_h));
      const Shape ys = pool_out(c.x, c.p);
      std::vector<double> v(static_cast<size_t>(c.x.numel()));
      std::mt19937_64 rng(seed += 10);
      for (double& e : v) e = static_cast<double>(static_cast<int>(rng() % 256) - 128) / 64.0;  // exact in bf16
      for (size_t i = 5; i < v.size(); i += 37) v[i] = std::nan("");
      const Tensor xh = Tensor::empty(c.x, dt, Device::cpu(), kNHWC);
      const Tensor x32 = Tensor::empty(c.x, DType::f32, Device::cpu(), kNHWC);
      copy_into(Tensor::from_vector(v, c.x), xh);
      copy_into(xh, x32);
      const Tensor y_ref = cpu_nan(ys, kNHWC), y = gpu_nan(ys, kNHWC, dt);
      ref_.max_pool2d_fwd({x32, y_ref, c.p});
      be().max_pool2d_fwd({to_gpu(xh), y, c.p});
      // Equal values, NaN where the reference has NaN (cuDNN's path need not keep a NaN's payload).
      const Tensor got = f32_of(to_cpu(y)).contiguous(), want = y_ref.contiguous();
      int64_t wrong = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float a = got.data<float>()[i], b = want.data<float>()[i];
        if (std::isnan(a) != std::isnan(b) || (!std::isnan(b) && std::memcmp(&a, &b, sizeof a) != 0)) ++wrong;
      }
      EXPECT_EQ(wrong, 0) << "max_pool2d_fwd: values that differ from the reference's";
    }
}

// A stem-sized channels-last backward keeps its window indices a few samples at a time in
// the context's scratch: the call allocates nothing (from the allocator, its temporary sat
// on top of direct mode's arena), and the chunks' seams change nothing (bit for bit the reference, ties included).
TEST_F(CudaPool, MaxPoolChannelsLastBackwardKeepsItsIndicesInTheScratch) {
  const Pool2dParams p = square_pool(3, 2, 1);
  const Shape xs{5, 64, 360, 360}, ys = pool_out(xs, p);  // 2 MiB of indices per sample: chunks of 2, 2, 1
  // Values from {-1, -0.5, 0, 0.5, 1}: ties in every window, and exact sums of gradients.
  const auto tied = [](const Shape& s, uint64_t seed) {
    std::vector<double> v(static_cast<size_t>(s.numel()));
    std::mt19937_64 rng(seed);
    for (double& e : v) e = static_cast<double>(static_cast<int>(rng() % 5) - 2) / 2.0;
    Tensor out = Tensor::empty(s, DType::f32, Device::cpu(), kNHWC);
    copy_into(Tensor::from_vector(v, s), out);
    return out;
  };
  const Tensor x = tied(xs, 1490);
  const Pair dy{tied(ys, 1491), to_gpu(tied(ys, 1491))};
  const Tensor y_ref = cpu_nan(ys, kNHWC), dx_ref = cpu_nan(xs, kNHWC);
  ref_.max_pool2d_fwd({x, y_ref, p});
  ref_.max_pool2d_bwd({x, y_ref, dy.cpu, dx_ref, p});
  const Tensor xg = to_gpu(x), y = gpu_nan(ys, kNHWC, DType::f32), dx = gpu_nan(xs, kNHWC, DType::f32);
  be().max_pool2d_fwd({xg, y, p});
  be().max_pool2d_bwd({xg, y, dy.gpu, dx, p});  // sizes the scratch
  Allocator& a = allocator_for(Device::cuda());
  a.reset_peak();
  const size_t before = a.stats().current_bytes;
  be().max_pool2d_bwd({xg, y, dy.gpu, dx, p});
  EXPECT_EQ(a.stats().peak_bytes, before) << "the indices came from the allocator";
  EXPECT_TRUE(bitwise_equal(to_cpu(dx), dx_ref)) << "max_pool2d_bwd";
}

TEST_F(CudaPool, GlobalAvgPool) {
  for (MemoryFormat fmt : {kNCHW, kNHWC}) {
    for (const Shape& xs : {Shape{2, 3, 5, 7}, Shape{1, 2048, 7, 7}, Shape{4, 64, 1, 1}}) {
      SCOPED_TRACE(xs.str() + (fmt == kNHWC ? " nhwc" : " nchw"));
      const Pair x = rand_pair(xs, 1500, fmt);
      const Pair y = nan_pair({xs[0], xs[1]});
      be().global_avg_pool_fwd({x.gpu, y.gpu});
      ref_.global_avg_pool_fwd({x.cpu, y.cpu});
      STRATA_EXPECT_CLOSE(y.gpu, y.cpu, kTolReduction, "global_avg_pool_fwd");
      const Pair dy = rand_pair({xs[0], xs[1]}, 1501), dx = nan_pair(xs, fmt);
      be().global_avg_pool_bwd({dy.gpu, dx.gpu});
      ref_.global_avg_pool_bwd({dy.cpu, dx.cpu});
      STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, kTolReduction, "global_avg_pool_bwd");
    }
  }
}

// Data movement: equal to the reference bit for bit, in f32 and bf16, dense and sliced
// views, both layouts, 32-bit indexing and the stem's shape at a real batch (the vector
// kernel for channels-last block tensors, the element one for the rest).
TEST_F(CudaPool, SpaceToDepth) {
  std::vector<SpaceToDepthCase> cases = space_to_depth_cases();
  cases.push_back({{8, 3, 224, 224}, 2, 3, 16, 115, 115});
  for (const DType dt : {DType::f32, DType::bf16})
    for (MemoryFormat fmt : {kNCHW, kNHWC})
      for (bool slice : {false, true})
        for (const SpaceToDepthCase& c : cases) {
          SCOPED_TRACE(c.x.str() + (fmt == kNHWC ? " nhwc " : " nchw ") + std::string(dtype_name(dt)) +
                       (slice ? " sliced" : ""));
          const auto as = [&](const Pair& f) {
            if (dt == DType::f32) return f;
            Pair q{Tensor::empty_like(f.cpu, f.cpu.sizes(), dt), Tensor::empty_like(f.gpu, f.gpu.sizes(), dt)};
            copy_into(f.cpu, q.cpu);
            copy_into(q.cpu, q.gpu);
            return q;
          };
          const Pair x = as(slice ? rand_slice_pair(c.x, 1600, fmt) : rand_pair(c.x, 1600, fmt));
          const Pair y = as(nan_pair(c.y(), fmt, slice));
          be().space_to_depth_fwd({x.gpu, y.gpu, c.params()});
          ref_.space_to_depth_fwd({x.cpu, y.cpu, c.params()});
          EXPECT_TRUE(bitwise_equal(to_cpu(y.gpu), y.cpu)) << "space_to_depth_fwd";
          const Pair dy = as(rand_pair(c.y(), 1601, fmt)), dx = as(nan_pair(c.x, fmt, slice));
          be().space_to_depth_bwd({dy.gpu, dx.gpu, c.params()});
          ref_.space_to_depth_bwd({dy.cpu, dx.cpu, c.params()});
          EXPECT_TRUE(bitwise_equal(to_cpu(dx.gpu), dx.cpu)) << "space_to_depth_bwd";
        }
}

}  // namespace
}  // namespace strata::testing
