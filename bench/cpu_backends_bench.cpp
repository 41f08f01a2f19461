// Micro benchmark of the production CPU backends:
//  - conv2d forward, backward data and backward weight on each CPU backend, in GFLOP/s,
//    on three of ResNet-50's layer shapes at N=8 (the `shape` argument, kConvShapes):
//    0: 3x3, pad 1, C=K=64, 56x56 (conv2_x); 1: 3x3, stride 2, pad 1, C=K=128,
//    56x56 -> 28x28 (conv3_1's 3x3 in v1.5); 2: 1x1, stride 2, 256 -> 512, 56x56 ->
//    28x28 (conv3_1's downsample);
//  - the raw GEMM of shape 0 (M=K=64, N=8*56*56, K=64*9) through OpenBLAS's
//    cblas_sgemm and oneDNN's dnnl_sgemm, whole batch and per image, and the GEMM of
//    each shape through Eigen's Tensor contraction on a ThreadPoolDevice of the eigen
//    backend's thread count, in GFLOP/s: the ceiling an im2col (patch-matrix)
//    convolution can reach with that library; and shape 0's product in bf16 through
//    Eigen's contraction (GFLOP/s and error: docs/results/cpu_eigen.md);
//  - ReLU on 64 floats through each backend object (static call, arguments built
//    once) and as a raw loop: the fixed cost of an op call.
// Compare numbers within one run only (timings drift up to 2x between runs on a 2-core machine), with repetitions:
//   cpu_backends_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// The context lines name OpenBLAS's kernel (core) and the thread counts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "strata/core/exit_status.h"
#include "strata/core/tensor.h"
#include "strata/core/version.h"
#include "strata/backends/static_backends.h"

#ifdef STRATA_BENCH_CBLAS
#include <cblas.h>
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
#include <dnnl.hpp>
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/Tensor>
#endif

namespace {

using namespace strata;            // NOLINT
using namespace strata::backends;  // NOLINT

constexpr int64_t kN = 8, kC = 64, kK = 64, kHW = 56;
constexpr double kConvFlops = 2.0 * kN * kK * kHW * kHW * kC * 9;

struct ConvShape {
  const char* label;
  int64_t c, k, hw, r, stride, pad;
  int64_t out() const { return (hw + 2 * pad - r) / stride + 1; }
  // The patch-matrix product: [k, c*r*r] x [c*r*r, N*out*out].
  int64_t gemm_k() const { return c * r * r; }
  int64_t gemm_n() const { return kN * out() * out(); }
  double flops() const { return 2.0 * static_cast<double>(k * gemm_k() * gemm_n()); }
};
constexpr ConvShape kConvShapes[] = {
    {"3x3 s1 64->64 56x56", kC, kK, kHW, 3, 1, 1},
    {"3x3 s2 128->128 56x56", 128, 128, kHW, 3, 2, 1},
    {"1x1 s2 256->512 56x56", 256, 512, kHW, 1, 2, 0},
};

Tensor filled(const Shape& s, float seed) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = seed * static_cast<float>((i * 7919) % 1000 - 500) / 500.0f;
  return t;
}

void set_flops(benchmark::State& st, double flops) {
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

struct ConvProblem {
  const ConvShape& s;
  Tensor x = filled({kN, s.c, s.hw, s.hw}, 1.0f), w = filled({s.k, s.c, s.r, s.r}, 0.1f);
  Tensor y = Tensor::empty({kN, s.k, s.out(), s.out()}), dy = filled({kN, s.k, s.out(), s.out()}, 0.5f);
  Tensor dx = Tensor::empty({kN, s.c, s.hw, s.hw}), dw = Tensor::empty({s.k, s.c, s.r, s.r});
  ops::Conv2dParams p;
  explicit ConvProblem(benchmark::State& st) : s(kConvShapes[st.range(0)]) {
    p.pad_h = p.pad_w = s.pad;
    p.stride_h = p.stride_w = s.stride;
    st.SetLabel(s.label);
  }
};

template <class B>
void BM_ConvFwd(benchmark::State& st) {
  B be;
  ConvProblem c(st);
  const ops::Conv2dFwdArgs a{c.x, c.w, {}, c.y, c.p};
  be.conv2d_fwd(a);  // plans, workspaces
  for (auto _ : st) {
    be.conv2d_fwd(a);
    benchmark::ClobberMemory();
  }
  set_flops(st, c.s.flops());
}

template <class B>
void BM_ConvBwdData(benchmark::State& st) {
  B be;
  ConvProblem c(st);
  const ops::Conv2dBwdDataArgs a{c.dy, c.w, c.dx, c.p};
  be.conv2d_bwd_data(a);
  for (auto _ : st) {
    be.conv2d_bwd_data(a);
    benchmark::ClobberMemory();
  }
  set_flops(st, c.s.flops());
}

template <class B>
void BM_ConvBwdWeight(benchmark::State& st) {
  B be;
  ConvProblem c(st);
  const ops::Conv2dBwdWeightArgs a{c.x, c.dy, c.dw, c.p};
  be.conv2d_bwd_weight(a);
  for (auto _ : st) {
    be.conv2d_bwd_weight(a);
    benchmark::ClobberMemory();
  }
  set_flops(st, c.s.flops());
}

// Shape 0's GEMM: [K, C*9] x [C*9, N*H*W] (batch) or N times [K, C*9] x
// [C*9, H*W] (per image, what the openblas backend's im2col path runs).
struct Gemm {
  int64_t m = kK, k = kC * 9, n_img = kHW * kHW;
  std::vector<float> a, b, c;
  Gemm() : a(m * k, 0.01f), b(k * n_img * kN, 0.02f), c(m * n_img * kN) {}
};

#ifdef STRATA_BENCH_CBLAS
void BM_OpenBlasSgemm(benchmark::State& st) {
  Gemm g;
  const bool per_image = st.range(0) != 0;
  for (auto _ : st) {
    if (per_image) {
      for (int64_t i = 0; i < kN; ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.n_img, g.k, 1.f, g.a.data(), g.k,
                    g.b.data() + i * g.k * g.n_img, g.n_img, 0.f, g.c.data() + i * g.m * g.n_img, g.n_img);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.n_img * kN, g.k, 1.f, g.a.data(), g.k,
                  g.b.data(), g.n_img * kN, 0.f, g.c.data(), g.n_img * kN);
    }
    benchmark::ClobberMemory();
  }
  set_flops(st, kConvFlops);
}
BENCHMARK(BM_OpenBlasSgemm)
    ->ArgName("per_image")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ;
#endif

#ifdef STRATA_HAVE_BACKEND_ONEDNN
void BM_OneDnnSgemm(benchmark::State& st) {
  Gemm g;
  for (auto _ : st) {
    dnnl_sgemm('N', 'N', g.m, g.n_img * kN, g.k, 1.f, g.a.data(), g.k, g.b.data(), g.n_img * kN, 0.f, g.c.data(),
               g.n_img * kN);
    benchmark::ClobberMemory();
  }
  set_flops(st, kConvFlops);
}
BENCHMARK(BM_OneDnnSgemm)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

#ifdef STRATA_HAVE_BACKEND_EIGEN
// The same product as one Eigen Tensor contraction, for each conv shape, on a pool as
// large as the eigen backend's (OMP_NUM_THREADS): what its patch-matrix convolution is
// measured against.
void BM_EigenContraction(benchmark::State& st) {
  const ConvShape& s = kConvShapes[st.range(0)];
  st.SetLabel(s.label);
  const std::vector<float> a(s.k * s.gemm_k(), 0.01f), b(s.gemm_k() * s.gemm_n(), 0.02f);
  std::vector<float> c(s.k * s.gemm_n());
  const int threads = EigenBackend{}.threads();
  Eigen::ThreadPool pool(threads);
  const Eigen::ThreadPoolDevice dev(&pool, threads);
  using In = Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>>;
  const In am(a.data(), s.k, s.gemm_k()), bm(b.data(), s.gemm_k(), s.gemm_n());
  Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>> cm(c.data(), s.k, s.gemm_n());
  const Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims{Eigen::IndexPair<Eigen::Index>(1, 0)};
  for (auto _ : st) {
    cm.device(dev) = am.contract(bm, dims);
    benchmark::ClobberMemory();
  }
  set_flops(st, s.flops());
}
BENCHMARK(BM_EigenContraction)->ArgName("shape")->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Shape 0's product in bf16 through the same contraction: whether the eigen backend
// could offer bf16. Counters: GFLOP/s, and the mean relative error against the f32
// contraction of the same (bf16-exact) values; with f32 accumulation only the output's
// own rounding would remain (at most 0.4 %).
void BM_EigenContractionBf16(benchmark::State& st) {
  using Bf16 = Eigen::bfloat16;
  const ConvShape& s = kConvShapes[0];
  const int64_t m = s.k, k = s.gemm_k(), n = s.gemm_n();
  std::vector<Bf16> a(m * k), b(k * n), c(m * n);
  std::vector<float> af(m * k), bf(k * n), cf(m * n);
  // Positive values: the error is not a cancellation's.
  for (int64_t i = 0; i < m * k; ++i) af[i] = static_cast<float>(a[i] = Bf16(static_cast<float>((i * 7919) % 1000) * 1e-3f));
  for (int64_t i = 0; i < k * n; ++i) bf[i] = static_cast<float>(b[i] = Bf16(static_cast<float>((i * 7907) % 1000) * 1e-3f));
  const int threads = EigenBackend{}.threads();
  Eigen::ThreadPool pool(threads);
  const Eigen::ThreadPoolDevice dev(&pool, threads);
  const Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims{Eigen::IndexPair<Eigen::Index>(1, 0)};
  auto map = [](auto& v, int64_t r, int64_t cols) {
    return Eigen::TensorMap<Eigen::Tensor<std::remove_reference_t<decltype(v[0])>, 2, Eigen::RowMajor>>(v.data(), r, cols);
  };
  for (auto _ : st) {
    map(c, m, n).device(dev) = map(a, m, k).contract(map(b, k, n), dims);
    benchmark::ClobberMemory();
  }
  map(cf, m, n).device(dev) = map(af, m, k).contract(map(bf, k, n), dims);
  double err = 0;
  for (int64_t i = 0; i < m * n; ++i) err += std::abs(static_cast<double>(c[i]) - cf[i]) / std::abs(cf[i]);
  st.counters["mean_rel_err"] = err / static_cast<double>(m * n);
  set_flops(st, s.flops());
}
BENCHMARK(BM_EigenContractionBf16)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

// ReLU on 64 floats: the per-call cost of each path.
struct Small {
  Tensor x = filled({64}, 1.0f), y = Tensor::empty({64});
};

void BM_Relu64Raw(benchmark::State& st) {
  Small s;
  const float* x = s.x.data<float>();
  float* y = s.y.data<float>();
  for (auto _ : st) {
    benchmark::DoNotOptimize(x);
    for (int i = 0; i < 64; ++i) y[i] = std::max(x[i], 0.0f);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Relu64Raw);

#ifdef STRATA_HAVE_BACKEND_ONEDNN
// oneDNN's own eltwise primitive on 64 floats, created once: the cost the onednn
// backend avoids by running small element-wise ops on loops.
void BM_Relu64OneDnnPrimitive(benchmark::State& st) {
  Small s;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::desc md({64}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  const dnnl::eltwise_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu, md, 0.f, 0.f}, eng);
  const dnnl::eltwise_forward relu(pd);
  dnnl::memory x(md, eng, s.x.data_ptr()), y(md, eng, s.y.data_ptr());
  for (auto _ : st) {
    relu.execute(strm, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}});
    strm.wait();
  }
}
BENCHMARK(BM_Relu64OneDnnPrimitive);
#endif

template <class B>
void BM_Relu64(benchmark::State& st) {
  B be;
  Small s;
  const ops::ReluFwdArgs a{s.x, s.y};
  be.relu_fwd(a);
  for (auto _ : st) {
    be.relu_fwd(a);
    benchmark::ClobberMemory();
  }
}

#define STRATA_BENCH_CONV(F, B) \
  BENCHMARK_TEMPLATE(F, B)->ArgName("shape")->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime()
#define STRATA_BENCH_BACKEND(B)           \
  STRATA_BENCH_CONV(BM_ConvFwd, B);       \
  STRATA_BENCH_CONV(BM_ConvBwdData, B);   \
  STRATA_BENCH_CONV(BM_ConvBwdWeight, B); \
  BENCHMARK_TEMPLATE(BM_Relu64, B);

#ifdef STRATA_HAVE_BACKEND_OPENBLAS
STRATA_BENCH_BACKEND(OpenBlasBackend)
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
STRATA_BENCH_BACKEND(OneDnnBackend)
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
STRATA_BENCH_BACKEND(EigenBackend)
#endif
BENCHMARK_TEMPLATE(BM_Relu64, ReferenceBackend);  // its conv: seconds per call

}  // namespace

int main(int argc, char** argv) {
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
  benchmark::AddCustomContext("openblas", OpenBlasBackend::describe());
#endif
#ifdef STRATA_HAVE_BACKEND_ONEDNN
  benchmark::AddCustomContext("onednn", OneDnnBackend{}.describe());
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
  benchmark::AddCustomContext("eigen", EigenBackend{}.describe());
#endif
  const char* omp = std::getenv("OMP_NUM_THREADS");
  benchmark::AddCustomContext("OMP_NUM_THREADS", omp ? omp : "(unset: one per core)");
  // With the default (active) policy, oneDNN's OpenMP threads spin at every barrier;
  // on a shared 2-core machine that made its conv 3-4x slower and a tiny primitive
  // cost milliseconds. Measure with OMP_WAIT_POLICY=passive there.
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  benchmark::AddCustomContext("OMP_WAIT_POLICY", wait ? wait : "(unset: libgomp default, spin then sleep)");
  if (print_version_if_asked(argc, argv, "cpu_backends_bench")) return kExitSuccess;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return kExitUsage;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
