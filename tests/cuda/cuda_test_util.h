#pragma once
// Helpers for the cuda backend's tests: the CudaBackend object is called directly
// with views of device tensors, and its outputs are compared with the
// ReferenceBackend's on the same random inputs (copied to the GPU with copy_into).
// Every test skips cleanly (GTEST_SKIP) on a machine without a usable GPU, which is
// where CI runs them.
//
// Tolerances are relative, norm-wise (support/compare.h), per op family, for f32
// with TF32 off:
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/backends/cuda/cuda_backend.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/core/tensor.h"
#include "support/compare.h"
#include "support/coverage.h"
#include "support/random.h"

namespace strata::testing {

// Element-wise ops computed the same way in f32: a rounding.
inline constexpr double kTolElementwise = 1e-6;
// Reductions, batch norm, pooling, losses, optimizer steps: sums in another order.
inline constexpr double kTolReduction = 1e-5;
// conv2d and linear: long f32 dot products, blocked differently by cuDNN/cuBLAS.
inline constexpr double kTolGemm = 1e-4;
// f16 / bf16 storage (compared with the reference in f32 on the same rounded inputs).
inline constexpr double kTolF16 = 5e-3;
inline constexpr double kTolBf16 = 3e-2;

inline bool is_half(DType dt) { return dt == DType::f16 || dt == DType::bf16; }
// The dtype the reference computes a dtype's values in (halves are exact in f32).
inline DType ref_dtype(DType dt) { return is_half(dt) ? DType::f32 : dt; }
// A comparison's tolerance for values stored in dt: the half types' own, 1e-12 in f64, else f32_tol
// (one of the kTol* above, by how the op computes).
inline double tol(DType dt, double f32_tol) {
  return dt == DType::f16 ? kTolF16 : dt == DType::bf16 ? kTolBf16 : dt == DType::f64 ? 1e-12 : f32_tol;
}

using backends::CudaBackend;
using backends::ReferenceBackend;
using ops::Conv2dParams;
using ops::Pool2dParams;

inline constexpr MemoryFormat kNCHW = MemoryFormat::contiguous;
inline constexpr MemoryFormat kNHWC = MemoryFormat::channels_last;

// Why the GPU tests skip here, or "" when a GPU is usable.
inline const std::string& gpu_skip_reason() {
  static const std::string why = backends::cuda::unavailable_reason();
  return why;
}

// Whether device 0 is a Hopper or later (compute capability 9.0+): where cuDNN's
// pre-compiled fused engines are what the tests expect to run.
inline bool sm90_or_later() {
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess && major >= 9;
}

inline MemoryFormat format_of(const Tensor& t) { return t.is_channels_last() && !t.is_contiguous() ? kNHWC : kNCHW; }

// A device copy of a CPU tensor, in the same memory format (or `fmt`).
inline Tensor to_gpu(const Tensor& cpu) {
  Tensor g = Tensor::empty(cpu.sizes(), cpu.dtype(), Device::cuda(), format_of(cpu));
  copy_into(cpu, g);
  return g;
}
inline Tensor to_gpu(const Tensor& cpu, MemoryFormat fmt) {
  Tensor g = Tensor::empty(cpu.sizes(), cpu.dtype(), Device::cuda(), fmt);
  copy_into(cpu, g);
  return g;
}
// A CPU copy of a device tensor (contiguous, or channels-last if it was).
inline Tensor to_cpu(const Tensor& g) {
  Tensor c = Tensor::empty(g.sizes(), g.dtype(), Device::cpu(), g.dim() == 4 ? format_of(g) : kNCHW);
  copy_into(g, c);
  return c;
}

// A dense CPU copy of t (any device, any strides) in dtype dt.
inline Tensor host_as(const Tensor& t, DType dt) {
  Tensor o = Tensor::empty(t.sizes(), dt, Device::cpu());
  copy_into(t, o);
  return o;
}
// Element-wise equality, NaN equal to NaN (exact results: selections, extremes, positions,
// and a kernel run twice).
inline ::testing::AssertionResult same_values(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "shapes differ: " << got.str() << " vs " << want.str();
  const std::vector<double> g = host_as(got, DType::f64).to_vector<double>();
  const std::vector<double> w = host_as(want, DType::f64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": got " << g[i] << ", want " << w[i];
  return ::testing::AssertionSuccess();
}

// A CPU f32 copy of t in t's layout (half-precision values are exact in f32).
inline Tensor f32_of(const Tensor& t) {
  Tensor o = Tensor::empty(t.sizes(), DType::f32, Device::cpu(), format_of(t));
  copy_into(t, o);
  return o;
}

// Tensors full of NaN, so a test notices any element an op forgets to write.
inline Tensor cpu_nan(const Shape& sizes, MemoryFormat fmt = kNCHW, DType dt = DType::f32) {
  Tensor t = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  ReferenceBackend{}.fill({t, NAN});
  return t;
}
inline Tensor gpu_nan(const Shape& sizes, MemoryFormat fmt = kNCHW, DType dt = DType::f32) {
  Tensor t = Tensor::empty(sizes, dt, Device::cuda(), fmt);
  CudaBackend{}.fill({t, NAN});
  return t;
}
inline Tensor cpu_scalar(double v) {
  Tensor t = Tensor::empty(Shape{}, DType::f32);
  ReferenceBackend{}.fill({t, v});
  return t;
}

// The same random values on the CPU and on the GPU.
struct Pair {
  Tensor cpu, gpu;
};
inline Pair rand_pair(const Shape& sizes, uint64_t seed, MemoryFormat fmt = kNCHW, double lo = -1.0,
                      double hi = 1.0) {
  Pair p;
  p.cpu = random_tensor(sizes, DType::f32, seed, lo, hi, fmt);
  p.gpu = to_gpu(p.cpu);
  return p;
}
// A channel slice (dim 1) of a larger random tensor: a strided view, same values on both.
inline Pair rand_slice_pair(const Shape& sizes, uint64_t seed, MemoryFormat fmt = kNCHW) {
  Shape big = sizes;
  big[1] += 3;
  Pair p = rand_pair(big, seed, fmt);
  p.cpu = p.cpu.narrow(1, 2, sizes[1]);
  p.gpu = p.gpu.narrow(1, 2, sizes[1]);
  return p;
}
inline Pair nan_pair(const Shape& sizes, MemoryFormat fmt = kNCHW, bool slice = false) {
  if (!slice) return {cpu_nan(sizes, fmt), gpu_nan(sizes, fmt)};
  Shape big = sizes;
  big[1] += 3;
  return {cpu_nan(big, fmt).narrow(1, 1, sizes[1]), gpu_nan(big, fmt).narrow(1, 1, sizes[1])};
}

#define STRATA_EXPECT_CLOSE(got, want, tol, what) \
  EXPECT_TRUE(::strata::testing::close(got, want, tol)) << "[" << (what) << "]"

// Base fixture: the backend under test and the reference; skips without a GPU.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << "no usable GPU: " << gpu_skip_reason();
    be_ = std::make_unique<CudaBackend>();
  }
  CudaBackend& be() { return *be_; }
  ReferenceBackend ref_;

 private:
  std::unique_ptr<CudaBackend> be_;
};

}  // namespace strata::testing
