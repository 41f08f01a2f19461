#pragma once
// Helpers for the production CPU backends' tests (onednn, openblas, eigen): each backend
// object is called directly with views of strata::Tensors and its outputs are
// compared with the ReferenceBackend's on the same random f32 inputs.
//
// Tolerances are relative, norm-wise (support/compare.h), per op family, for f32.
// Measured worst cases on the test shapes (2 threads, AVX-512 host): conv/linear
// 5.6e-7, batch norm 3.3e-7, pooling/losses/optimizers/reductions <= 1.9e-7,
// relu/add/scale/axpy exact; the bounds leave more than 10x headroom.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/backends/api/backend.h"
#include "strata/backends/reference/reference_backend.h"
#include "strata/core/tensor.h"
#include "strata/backends/static_backends.h"
#include "support/compare.h"
#include "support/coverage.h"
#include "support/random.h"

namespace strata::testing {

// Element-wise ops computed the same way in f32 (relu, add, scale, axpy): a rounding.
inline constexpr double kTolElementwise = 1e-6;
// Reductions, batch norm, pooling, losses, optimizer steps: sums in another order.
inline constexpr double kTolReduction = 1e-5;
// conv2d and linear: long f32 dot products blocked differently by each library.
inline constexpr double kTolGemm = 1e-5;

using backends::Backend;
using backends::ReferenceBackend;
using ops::Conv2dParams;
using ops::Pool2dParams;

inline constexpr MemoryFormat kNCHW = MemoryFormat::contiguous;
inline constexpr MemoryFormat kNHWC = MemoryFormat::channels_last;

// The backend called `name` as a fresh object, or null when this build lacks it.
inline std::unique_ptr<Backend> make_cpu_backend(const std::string& name) {
#ifdef STRATA_HAVE_BACKEND_ONEDNN
  if (name == "onednn") return std::make_unique<backends::BackendAdapter<backends::OneDnnBackend>>();
#endif
#ifdef STRATA_HAVE_BACKEND_OPENBLAS
  if (name == "openblas") return std::make_unique<backends::BackendAdapter<backends::OpenBlasBackend>>();
#endif
#ifdef STRATA_HAVE_BACKEND_EIGEN
  if (name == "eigen") return std::make_unique<backends::BackendAdapter<backends::EigenBackend>>();
#endif
  return nullptr;
}

// An f32 (by default) tensor full of NaN: a test notices any element an op forgets.
inline Tensor nan_tensor(const Shape& sizes, MemoryFormat fmt = kNCHW, DType dt = DType::f32) {
  Tensor t = Tensor::empty(sizes, dt, Device::cpu(), fmt);
  ReferenceBackend{}.fill({t, NAN});
  return t;
}
inline Tensor scalar_tensor(double v, DType dt = DType::f32) {
  Tensor t = Tensor::empty(Shape{}, dt);
  ReferenceBackend{}.fill({t, v});
  return t;
}
inline Tensor rand_f32(const Shape& sizes, uint64_t seed, MemoryFormat fmt = kNCHW, double lo = -1.0,
                       double hi = 1.0) {
  return random_tensor(sizes, DType::f32, seed, lo, hi, fmt);
}
// A copy with the same sizes and memory format.
inline Tensor copy_of(const Tensor& t) {
  return t.clone(t.is_channels_last() && !t.is_contiguous() ? kNHWC : kNCHW);
}

#define STRATA_EXPECT_CLOSE(got, want, tol, what) \
  EXPECT_TRUE(::strata::testing::close(got, want, tol)) << "[" << (what) << "]"

// Base fixture: the backend under test (the test parameter) and the reference.
class CpuBackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = make_cpu_backend(GetParam());
    if (!backend_) GTEST_SKIP() << "backend " << GetParam() << " is not built";
  }
  Backend& be() { return *backend_; }
  ReferenceBackend ref_;

 private:
  std::unique_ptr<Backend> backend_;
};

inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// Every production CPU backend; a test of one this build lacks is skipped.
inline const std::vector<std::string>& cpu_backend_names() {
  static const std::vector<std::string> names = {"onednn", "openblas", "eigen"};
  return names;
}
#define STRATA_CPU_BACKEND_SUITE(Fixture)                                                   \
  INSTANTIATE_TEST_SUITE_P(Cpu, Fixture, ::testing::ValuesIn(::strata::testing::cpu_backend_names()), \
                           ::strata::testing::backend_param_name)

}  // namespace strata::testing
