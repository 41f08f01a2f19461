// conv2d forward, backward data, backward weight and backward bias on the cuda backend
// against the reference: batch 1, odd sizes, stride, padding, dilation, groups, 1x1,
// NHWC, strided views, mixed layouts, ResNet-50 layer shapes, f16/bf16, TF32 and the
// benchmark (cudnnFind) algorithm choice. Tolerance kTolGemm (1e-4) in f32.
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace strata::testing {
namespace {

STRATA_COVERS(conv2d_fwd, "cuda_vs_reference");
STRATA_COVERS(conv2d_bwd_data, "cuda_vs_reference");
STRATA_COVERS(conv2d_bwd_weight, "cuda_vs_reference");
STRATA_COVERS(conv2d_bwd_bias, "cuda_vs_reference");

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
  MemoryFormat fmt = kNCHW;  // of x, y, dy, dx
  bool bias = true;
  bool strided_views = false;      // x, dy, y, dx as channel slices of larger tensors
  MemoryFormat wfmt = MemoryFormat::contiguous;  // of w and dw (kNHWC with fmt kNCHW: mixed)
  bool w_same_as_x = true;         // w in fmt (ignores wfmt)
};

Shape out_shape(const ConvCase& c) {
  const int64_t ho = (c.x[2] + 2 * c.p.pad_h - c.p.dilation_h * (c.r - 1) - 1) / c.p.stride_h + 1;
  const int64_t wo = (c.x[3] + 2 * c.p.pad_w - c.p.dilation_w * (c.s - 1) - 1) / c.p.stride_w + 1;
  return {c.x[0], c.k, ho, wo};
}

Pair input(const Shape& sizes, uint64_t seed, MemoryFormat fmt, bool strided) {
  return strided ? rand_slice_pair(sizes, seed, fmt) : rand_pair(sizes, seed, fmt);
}

void check_conv(CudaBackend& be, ReferenceBackend& ref, const ConvCase& c, uint64_t seed,
                double tol = kTolGemm) {
  SCOPED_TRACE(c.name);
  const Shape ys = out_shape(c);
  const Shape ws{c.k, c.x[1] / c.p.groups, c.r, c.s};
  const MemoryFormat wf = c.w_same_as_x ? c.fmt : c.wfmt;
  const Pair x = input(c.x, seed, c.fmt, c.strided_views);
  const Pair w = rand_pair(ws, seed + 1, wf);
  const Pair b = c.bias ? rand_pair({c.k}, seed + 2) : Pair{};
  const Pair dy = input(ys, seed + 3, c.fmt, c.strided_views);

  const Pair y = nan_pair(ys, c.fmt, c.strided_views);
  be.conv2d_fwd({x.gpu, w.gpu, b.gpu, y.gpu, c.p});
  ref.conv2d_fwd({x.cpu, w.cpu, b.cpu, y.cpu, c.p});
  STRATA_EXPECT_CLOSE(y.gpu, y.cpu, tol, "conv2d_fwd");

  const Pair dx = nan_pair(c.x, c.fmt, c.strided_views);
  be.conv2d_bwd_data({dy.gpu, w.gpu, dx.gpu, c.p});
  ref.conv2d_bwd_data({dy.cpu, w.cpu, dx.cpu, c.p});
  STRATA_EXPECT_CLOSE(dx.gpu, dx.cpu, tol, "conv2d_bwd_data");

  const Pair dw = nan_pair(ws, wf);
  be.conv2d_bwd_weight({x.gpu, dy.gpu, dw.gpu, c.p});
  ref.conv2d_bwd_weight({x.cpu, dy.cpu, dw.cpu, c.p});
  STRATA_EXPECT_CLOSE(dw.gpu, dw.cpu, tol, "conv2d_bwd_weight");

  const Pair db = nan_pair({c.k});
  be.conv2d_bwd_bias({dy.gpu, db.gpu});
  ref.conv2d_bwd_bias({dy.cpu, db.cpu});
  STRATA_EXPECT_CLOSE(db.gpu, db.cpu, kTolReduction, "conv2d_bwd_bias");
}

class CudaConv : public CudaTest {};

TEST_F(CudaConv, SmallShapes) {
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
      {"no_bias_5x5_pad2", {1, 2, 8, 8}, 3, 5, 5, P(1, 1, 2, 2), kNCHW, false},
      {"nhwc_3x3_pad1", {2, 8, 6, 5}, 8, 3, 3, P(1, 1, 1, 1), kNHWC},
      {"nhwc_stride2_groups2", {1, 8, 7, 7}, 8, 3, 3, P(2, 2, 1, 1, 1, 1, 2), kNHWC},
      {"nhwc_1x1", {2, 16, 4, 4}, 8, 1, 1, P(1, 1, 0, 0), kNHWC},
      {"nhwc_odd_channels_batch1", {1, 3, 9, 7}, 5, 3, 3, P(2, 2, 1, 1), kNHWC},
      {"strided_views_3x3", {2, 5, 6, 6}, 4, 3, 3, P(1, 1, 1, 1), kNCHW, true, true},
      {"strided_views_nhwc_1x1", {2, 5, 4, 3}, 6, 1, 1, P(1, 1, 0, 0), kNHWC, true, true},
      {"mixed_x_nchw_w_nhwc", {2, 4, 6, 6}, 6, 3, 3, P(1, 1, 1, 1), kNCHW, true, false, kNHWC, false},
      {"mixed_x_nhwc_w_nchw", {2, 4, 6, 6}, 6, 3, 3, P(2, 2, 1, 1), kNHWC, true, false, kNCHW, false},
  };
  uint64_t seed = 100;
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
}

// Real ResNet-50 layers (batch 2, spatial sizes as at 224x224 input where affordable
// for the CPU reference).
TEST_F(CudaConv, ResNet50LayerShapes) {
  const std::vector<ConvCase> cases = {
      {"stem_7x7_s2_3to64", {2, 3, 64, 64}, 64, 7, 7, P(2, 2, 3, 3), kNCHW, false},
      {"layer1_1x1_64to256", {2, 64, 56, 56}, 256, 1, 1, P(1, 1, 0, 0), kNCHW, false},
      {"layer1_3x3_64", {2, 64, 56, 56}, 64, 3, 3, P(1, 1, 1, 1), kNCHW, false},
      {"layer2_3x3_128_s2", {2, 128, 56, 56}, 128, 3, 3, P(2, 2, 1, 1), kNCHW, false},
      {"layer3_downsample_1x1_s2_512to1024", {2, 512, 28, 28}, 1024, 1, 1, P(2, 2, 0, 0), kNCHW, false},
      {"layer3_3x3_256_nhwc", {2, 256, 14, 14}, 256, 3, 3, P(1, 1, 1, 1), kNHWC, false},
      {"layer4_1x1_2048to512", {2, 2048, 7, 7}, 512, 1, 1, P(1, 1, 0, 0), kNCHW, false},
      {"layer4_3x3_512_nhwc", {2, 512, 7, 7}, 512, 3, 3, P(1, 1, 1, 1), kNHWC, false},
  };
  uint64_t seed = 500;
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
}

// Timed engine choice (graph API) and cudnnFind (legacy API) must compute the same
// function.
TEST_F(CudaConv, BenchmarkModeAlgorithms) {
  be().set_benchmark(true);
  const auto before = backends::cuda::conv_api_counts();
  check_conv(be(), ref_, {"bench_3x3", {4, 16, 14, 14}, 32, 3, 3, P(1, 1, 1, 1)}, 900);
  check_conv(be(), ref_, {"bench_nhwc_s2", {4, 16, 14, 14}, 32, 3, 3, P(2, 2, 1, 1), kNHWC}, 910);
  EXPECT_EQ(backends::cuda::conv_api_counts().graph - before.graph, 6u);
  be().set_deterministic(false);
  check_conv(be(), ref_, {"bench_nondet", {4, 16, 14, 14}, 32, 3, 3, P(1, 1, 1, 1)}, 920);
  be().set_cudnn_graph(false);
  be().set_deterministic(true);
  check_conv(be(), ref_, {"find_3x3", {4, 16, 14, 14}, 32, 3, 3, P(1, 1, 1, 1)}, 930);
  check_conv(be(), ref_, {"find_nhwc_s2", {4, 16, 14, 14}, 32, 3, 3, P(2, 2, 1, 1), kNHWC}, 940);
}

// TF32 on: still the same function, to TF32's precision (10-bit mantissa inputs).
TEST_F(CudaConv, Tf32Switch) {
  be().set_allow_tf32(true);
  check_conv(be(), ref_, {"tf32_3x3", {2, 64, 14, 14}, 64, 3, 3, P(1, 1, 1, 1)}, 950, 5e-3);
}

// Deterministic algorithms (the default) give the same bits on every run.
TEST_F(CudaConv, DeterministicBitwise) {
  const Conv2dParams p = P(1, 1, 1, 1);
  const Pair x = rand_pair({8, 64, 28, 28}, 960), w = rand_pair({64, 64, 3, 3}, 961);
  const Pair dy = rand_pair({8, 64, 28, 28}, 962);
  Tensor dw1 = gpu_nan({64, 64, 3, 3}), dw2 = gpu_nan({64, 64, 3, 3});
  Tensor dx1 = gpu_nan({8, 64, 28, 28}), dx2 = gpu_nan({8, 64, 28, 28});
  be().conv2d_bwd_weight({x.gpu, dy.gpu, dw1, p});
  be().conv2d_bwd_data({dy.gpu, w.gpu, dx1, p});
  be().conv2d_bwd_weight({x.gpu, dy.gpu, dw2, p});
  be().conv2d_bwd_data({dy.gpu, w.gpu, dx2, p});
  EXPECT_TRUE(bitwise_equal(to_cpu(dw1), to_cpu(dw2)));
  EXPECT_TRUE(bitwise_equal(to_cpu(dx1), to_cpu(dx2)));
}

// The graph API's cached plans are the default path and the legacy calls the
// fallback; both must compute the same function, and the counters must show which
// path ran (a graph path that silently fell back would hide a host-time regression).
TEST_F(CudaConv, GraphAndLegacyApis) {
  const std::vector<ConvCase> cases = {
      {"graph_batch1_odd", {1, 3, 7, 9}, 5, 3, 3, P(1, 1, 1, 1)},
      {"graph_stride2_nhwc", {2, 8, 9, 8}, 8, 3, 3, P(2, 2, 1, 1), kNHWC},
      {"graph_1x1_s2", {2, 64, 14, 14}, 128, 1, 1, P(2, 2, 0, 0), kNCHW, false},
  };
  const auto before = backends::cuda::conv_api_counts();
  uint64_t seed = 1200;
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
  const auto mid = backends::cuda::conv_api_counts();
  EXPECT_EQ(mid.graph - before.graph, 3 * cases.size()) << "every f32 convolution should run from a graph plan";
  EXPECT_EQ(mid.legacy, before.legacy);
  be().set_cudnn_graph(false);
  for (const ConvCase& c : cases) check_conv(be(), ref_, c, seed += 10);
  const auto after = backends::cuda::conv_api_counts();
  EXPECT_EQ(after.graph, mid.graph);
  EXPECT_EQ(after.legacy - mid.legacy, 3 * cases.size());
}

// The inference epilogue (op_args.h): y = relu?(conv(x, w) + b + z) in one call, against
// the reference's fused form (bitwise its separate conv, add and relu: tests/cpu_backends)
// on the same rounded values, f32 within kTolGemm, bf16 within kTolBf16; through the
// cuDNN graph where an engine runs the fused graph under the engine policy, and through
// strata's epilogue kernel after the convolution (cudnn_fused_epilogue off). The counters
// say which ran: every call is one or the other, and with the setting off, the kernel.
// A folded ResNet's epilogues in bf16 channels-last (bias with the residual and the ReLU,
// or a downsampling convolution's bias alone) run inside cuDNN's graph on sm_90 and
// later, with the residual added before the bias (conv_graph.cpp).
TEST_F(CudaConv, FusedEpilogue) {
  struct Case {
    std::string name;
    Shape x;
    int64_t k, r;
    Conv2dParams p;
    bool bias, with_z, relu;
    bool z_other_layout;  // z in the other layout than y's (strata's strided epilogue)
  };
  const std::vector<Case> cases = {
      {"resnet_3x3_bias_z_relu", {2, 64, 14, 14}, 64, 3, P(1, 1, 1, 1), true, true, true, false},
      {"resnet_1x1_s2_z", {2, 64, 14, 14}, 128, 1, P(2, 2, 0, 0), false, true, false, false},
      {"resnet_1x1_s2_bias", {2, 64, 14, 14}, 128, 1, P(2, 2, 0, 0), true, false, false, false},
      {"resnet_1x1_bias_z_relu", {2, 64, 14, 14}, 256, 1, P(1, 1, 0, 0), true, true, true, false},
      {"resnet_1x1_relu", {1, 256, 7, 7}, 64, 1, P(1, 1, 0, 0), true, false, true, false},
      {"odd_batch1_relu_z", {1, 8, 7, 9}, 24, 3, P(1, 1, 1, 1), true, true, true, false},
      {"z_other_layout", {2, 16, 9, 9}, 32, 3, P(2, 2, 1, 1), true, true, true, true},
  };
  auto f32 = [](const Tensor& t) {
    Tensor o = Tensor::empty(t.sizes(), DType::f32, Device::cpu(), format_of(t));
    copy_into(t, o);
    return o;
  };
  uint64_t seed = 1500;
  for (bool in_cudnn : {true, false}) {
    be().set_cudnn_fused_epilogue(in_cudnn);
    for (DType dt : {DType::f32, DType::bf16})
      for (MemoryFormat fmt : {kNCHW, kNHWC})
        for (const Case& c : cases) {
          SCOPED_TRACE(::testing::Message() << c.name << " " << dtype_name(dt) << (fmt == kNHWC ? " nhwc" : " nchw")
                                            << (in_cudnn ? " cudnn graph" : " strata kernel"));
          const ConvCase cc{c.name, c.x, c.k, c.r, c.r, c.p};
          const Shape ys = out_shape(cc);
          const MemoryFormat zf = !c.z_other_layout ? fmt : (fmt == kNHWC ? kNCHW : kNHWC);
          const Tensor x = random_tensor(c.x, dt, seed += 10, -1, 1, fmt);
          const Tensor w = random_tensor({c.k, c.x[1], c.r, c.r}, dt, seed + 1, -0.5, 0.5, fmt);
          const Tensor b = c.bias ? random_tensor({c.k}, dt, seed + 2) : Tensor();
          const Tensor z = c.with_z ? random_tensor(ys, dt, seed + 3, -1, 1, zf) : Tensor();
          // The argument struct holds views: the f32 copies must outlive the call.
          const Tensor xr = f32(x), wr = f32(w), br = c.bias ? f32(b) : Tensor();
          const Tensor zr = c.with_z ? f32(z) : Tensor(), y_ref = cpu_nan(ys, fmt);
          ops::Conv2dFwdArgs r{xr, wr, br, y_ref, c.p};
          r.z = zr;
          r.relu = c.relu;
          ref_.conv2d_fwd(r);
          const Tensor xg = to_gpu(x), wg = to_gpu(w), bg = c.bias ? to_gpu(b) : Tensor();
          const Tensor zg = c.with_z ? to_gpu(z) : Tensor(), y = gpu_nan(ys, fmt, dt);
          ops::Conv2dFwdArgs g{xg, wg, bg, y, c.p};
          g.z = zg;
          g.relu = c.relu;
          const auto before = backends::cuda::conv_api_counts();
          be().conv2d_fwd(g);
          const auto after = backends::cuda::conv_api_counts();
          STRATA_EXPECT_CLOSE(f32(to_cpu(y)), y_ref, dt == DType::bf16 ? kTolBf16 : kTolGemm, "conv2d_fwd fused");
          const size_t fused = after.fused - before.fused, kernels = after.epilogue_kernels - before.epilogue_kernels;
          EXPECT_EQ(fused + kernels, 1u);
          if (!in_cudnn) {
            EXPECT_EQ(kernels, 1u);
          }
          if (in_cudnn && dt == DType::bf16 && fmt == kNHWC && c.name.starts_with("resnet_") && c.bias &&
              sm90_or_later()) {
            EXPECT_EQ(fused, 1u) << "ResNet's bf16 channels-last epilogue outside cuDNN's graph";
          }
          if (in_cudnn)
            RecordProperty(c.name + (dt == DType::bf16 ? "_bf16" : "_f32") + (fmt == kNHWC ? "_nhwc" : "_nchw"),
                           fused ? "cudnn graph" : "strata kernel");
        }
  }
}

// f16 / bf16: cuDNN on the tensor cores with f32 accumulation, compared with the
// f32 reference on the same (rounded) values.
void check_half_conv(CudaBackend& be, ReferenceBackend& ref, DType dt, MemoryFormat fmt, double tol) {
  const Conv2dParams p = P(1, 1, 1, 1);
  const Shape xs{2, 16, 9, 9}, ws{32, 16, 3, 3}, ys{2, 32, 9, 9};
  const Tensor x16 = random_tensor(xs, dt, 970, -1, 1, fmt), w16 = random_tensor(ws, dt, 971, -1, 1, fmt);
  const Tensor b16 = random_tensor({32}, dt, 972), dy16 = random_tensor(ys, dt, 973, -1, 1, fmt);
  auto f32 = [](const Tensor& t) {
    Tensor o = Tensor::empty(t.sizes(), DType::f32, Device::cpu(), format_of(t));
    copy_into(t, o);
    return o;
  };
  const Tensor y = gpu_nan(ys, fmt, dt), y_ref = cpu_nan(ys, fmt);
  be.conv2d_fwd({to_gpu(x16), to_gpu(w16), to_gpu(b16), y, p});
  ref.conv2d_fwd({f32(x16), f32(w16), f32(b16), y_ref, p});
  STRATA_EXPECT_CLOSE(y, y_ref, tol, "conv2d_fwd half");
  const Tensor dx = gpu_nan(xs, fmt, dt), dx_ref = cpu_nan(xs, fmt);
  be.conv2d_bwd_data({to_gpu(dy16), to_gpu(w16), dx, p});
  ref.conv2d_bwd_data({f32(dy16), f32(w16), dx_ref, p});
  STRATA_EXPECT_CLOSE(dx, dx_ref, tol, "conv2d_bwd_data half");
  const Tensor dw = gpu_nan(ws, fmt, dt), dw_ref = cpu_nan(ws, fmt);
  be.conv2d_bwd_weight({to_gpu(x16), to_gpu(dy16), dw, p});
  ref.conv2d_bwd_weight({f32(x16), f32(dy16), dw_ref, p});
  STRATA_EXPECT_CLOSE(dw, dw_ref, tol, "conv2d_bwd_weight half");
  const Tensor db = gpu_nan({32}, kNCHW, dt), db_ref = cpu_nan({32});
  be.conv2d_bwd_bias({to_gpu(dy16), db});
  ref.conv2d_bwd_bias({f32(dy16), db_ref});
  STRATA_EXPECT_CLOSE(db, db_ref, tol, "conv2d_bwd_bias half");
}

TEST_F(CudaConv, HalfPrecision) {
  ASSERT_TRUE(be().capabilities().supports(ops::OpId::conv2d_fwd, DType::f16));
  ASSERT_TRUE(be().capabilities().supports(ops::OpId::conv2d_fwd, DType::bf16));
  EXPECT_FALSE(be().capabilities().supports(ops::OpId::conv2d_fwd, DType::f64));
  {
    SCOPED_TRACE("f16 nchw");
    check_half_conv(be(), ref_, DType::f16, kNCHW, kTolF16);
  }
  {
    SCOPED_TRACE("f16 nhwc");
    check_half_conv(be(), ref_, DType::f16, kNHWC, kTolF16);
  }
  {
    SCOPED_TRACE("bf16 nhwc");
    check_half_conv(be(), ref_, DType::bf16, kNHWC, kTolBf16);
  }
}

}  // namespace
}  // namespace strata::testing
