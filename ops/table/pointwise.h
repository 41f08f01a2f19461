#pragma once
// The element-wise formulas of ops/table/pointwise.def as functors, host and device code
// alike: the CPU loops (backends/cpu/pointwise.h, the reference backend) and the CUDA kernels
// instantiate the same functor, so a formula and its derivative are written once.
//
//   UnaryFn::exp                      the op's tag (UnaryFwdArgs/UnaryBwdArgs::fn)
//   UnaryFunctor<UnaryFn::exp>::fwd    y = f(x, p0, p1) in the compute type A
//   UnaryFunctor<UnaryFn::exp>::bwd    dx = f'(x, y, dy, p0, p1)
//   visit_unary(fn, f)                 f(std::integral_constant<UnaryFn, fn>{}) for a run-time tag
// and the same for BinaryFn (fwd(a, b), bwd_a / bwd_b(a, b, y, dy)).
#include <cmath>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "strata/core/error.h"

#if defined(__CUDACC__)
#define STRATA_POINTWISE_FN __host__ __device__ inline
#else
#define STRATA_POINTWISE_FN inline
#endif

namespace strata::ops {

// What the tests draw for an op's inputs (away from kinks and poles).
enum class PointwiseDomain : uint8_t { any, positive, nonzero };

enum class UnaryFn : uint8_t {
#define STRATA_UNARY(name, params, fwd, bwd, domain) name,
#include "strata/ops/table/pointwise.def"
#undef STRATA_UNARY
};
enum class BinaryFn : uint8_t {
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain) name,
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
};

enum class CompareFn : uint8_t {
#define STRATA_COMPARE(name, expr) name,
#include "strata/ops/table/pointwise.def"
#undef STRATA_COMPARE
};
template <CompareFn F>
struct CompareFunctor;
#define STRATA_COMPARE(name, expr)                 \
  template <>                                      \
  struct CompareFunctor<CompareFn::name> {         \
    template <class A>                             \
    STRATA_POINTWISE_FN static bool fwd(A a, A b) { \
      return expr;                                 \
    }                                              \
  };
#include "strata/ops/table/pointwise.def"
#undef STRATA_COMPARE
template <class F>
decltype(auto) visit_compare(CompareFn fn, F&& f) {
  switch (fn) {
#define STRATA_COMPARE(name, expr) \
  case CompareFn::name:            \
    return f(std::integral_constant<CompareFn, CompareFn::name>{});
#include "strata/ops/table/pointwise.def"
#undef STRATA_COMPARE
  }
  STRATA_FAIL("pointwise: unknown comparison ", static_cast<int>(fn));
}
constexpr std::string_view compare_name(CompareFn fn) {
  switch (fn) {
#define STRATA_COMPARE(name, expr) \
  case CompareFn::name:            \
    return #name;
#include "strata/ops/table/pointwise.def"
#undef STRATA_COMPARE
  }
  return "?";
}

// The math the formulas call, in float and double, on the host and in CUDA device code
// (the C library's names, which CUDA's device math library provides too). The code between
// "codegen:begin" and "codegen:end" is also written, as it is, into the programs codegen/ generates.
// codegen:begin pointwise_math
namespace m {
STRATA_POINTWISE_FN float exp(float x) { return ::expf(x); }
STRATA_POINTWISE_FN double exp(double x) { return ::exp(x); }
STRATA_POINTWISE_FN float log(float x) { return ::logf(x); }
STRATA_POINTWISE_FN double log(double x) { return ::log(x); }
STRATA_POINTWISE_FN float sqrt(float x) { return ::sqrtf(x); }
STRATA_POINTWISE_FN double sqrt(double x) { return ::sqrt(x); }
STRATA_POINTWISE_FN float tanh(float x) { return ::tanhf(x); }
STRATA_POINTWISE_FN double tanh(double x) { return ::tanh(x); }
STRATA_POINTWISE_FN float erf(float x) { return ::erff(x); }
STRATA_POINTWISE_FN double erf(double x) { return ::erf(x); }
STRATA_POINTWISE_FN float pow(float x, float y) { return ::powf(x, y); }
STRATA_POINTWISE_FN double pow(double x, double y) { return ::pow(x, y); }
// GELU's tanh argument sqrt(2/pi) (x + 0.044715 x^3) and its derivative in x.
template <class A>
STRATA_POINTWISE_FN A gelu_inner(A x) {
  return A(0.79788456080286535588) * (x + A(0.044715) * x * x * x);
}
template <class A>
STRATA_POINTWISE_FN A gelu_inner_dx(A x) {
  return A(0.79788456080286535588) * (A(1) + A(3) * A(0.044715) * x * x);
}
}  // namespace m
// codegen:end

template <UnaryFn F>
struct UnaryFunctor;
#define STRATA_UNARY(name, params, fwd_expr, bwd_expr, domain_)                                              \
  template <>                                                                                        \
  struct UnaryFunctor<UnaryFn::name> {                                                               \
    static constexpr std::string_view kName = #name;                                                 \
    static constexpr int kParams = params;                                                           \
    static constexpr PointwiseDomain kDomain = PointwiseDomain::domain_;                             \
    template <class A>                                                                               \
    STRATA_POINTWISE_FN static A fwd(A x, [[maybe_unused]] double p0, [[maybe_unused]] double p1) { \
      return fwd_expr;                                                                               \
    }                                                                                                \
    template <class A>                                                                               \
    STRATA_POINTWISE_FN static A bwd([[maybe_unused]] A x, [[maybe_unused]] A y, A dy,               \
                                     [[maybe_unused]] double p0, [[maybe_unused]] double p1) {       \
      return bwd_expr;                                                                               \
    }                                                                                                \
  };
#include "strata/ops/table/pointwise.def"
#undef STRATA_UNARY

template <BinaryFn F>
struct BinaryFunctor;
#define STRATA_BINARY(name, fwd_expr, bwd_a_expr, bwd_b_expr, domain_)                              \
  template <>                                                                                       \
  struct BinaryFunctor<BinaryFn::name> {                                                            \
    static constexpr std::string_view kName = #name;                                                \
    static constexpr PointwiseDomain kDomain = PointwiseDomain::domain_;                            \
    template <class A>                                                                              \
    STRATA_POINTWISE_FN static A fwd(A a, A b) {                                                    \
      return fwd_expr;                                                                              \
    }                                                                                               \
    template <class A>                                                                              \
    STRATA_POINTWISE_FN static A bwd_a([[maybe_unused]] A a, [[maybe_unused]] A b,                  \
                                       [[maybe_unused]] A y, A dy) {                                \
      return bwd_a_expr;                                                                            \
    }                                                                                               \
    template <class A>                                                                              \
    STRATA_POINTWISE_FN static A bwd_b([[maybe_unused]] A a, [[maybe_unused]] A b,                  \
                                       [[maybe_unused]] A y, A dy) {                                \
      return bwd_b_expr;                                                                            \
    }                                                                                               \
  };
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY

// The run-time tag to the functor's compile-time one: f(std::integral_constant<UnaryFn, F>{}).
template <class F>
decltype(auto) visit_unary(UnaryFn fn, F&& f) {
  switch (fn) {
#define STRATA_UNARY(name, params, fwd, bwd, domain) \
  case UnaryFn::name:                        \
    return f(std::integral_constant<UnaryFn, UnaryFn::name>{});
#include "strata/ops/table/pointwise.def"
#undef STRATA_UNARY
  }
  STRATA_FAIL("pointwise: unknown unary function ", static_cast<int>(fn));
}
template <class F>
decltype(auto) visit_binary(BinaryFn fn, F&& f) {
  switch (fn) {
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain) \
  case BinaryFn::name:                                 \
    return f(std::integral_constant<BinaryFn, BinaryFn::name>{});
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
  }
  STRATA_FAIL("pointwise: unknown binary function ", static_cast<int>(fn));
}

constexpr std::string_view unary_name(UnaryFn fn) {
  switch (fn) {
#define STRATA_UNARY(name, params, fwd, bwd, domain) \
  case UnaryFn::name:                        \
    return #name;
#include "strata/ops/table/pointwise.def"
#undef STRATA_UNARY
  }
  return "?";
}
// The number of scalar parameters a formula takes (p0, p1).
constexpr int unary_params(UnaryFn fn) {
  switch (fn) {
#define STRATA_UNARY(name, params, fwd, bwd, domain) \
  case UnaryFn::name:                        \
    return params;
#include "strata/ops/table/pointwise.def"
#undef STRATA_UNARY
  }
  return 0;
}
constexpr std::string_view binary_name(BinaryFn fn) {
  switch (fn) {
#define STRATA_BINARY(name, fwd, bwd_a, bwd_b, domain) \
  case BinaryFn::name:                                 \
    return #name;
#include "strata/ops/table/pointwise.def"
#undef STRATA_BINARY
  }
  return "?";
}

}  // namespace strata::ops
