#pragma once
// Tensor factories, as torch::zeros/ones/full/rand/randn/randint/arange/from_blob:
//
//   Generator gen(42);
//   Tensor x = randn({256, 16}, gen);                 // f32, cpu
//   Tensor y = randint(0, 4, {256}, gen);             // i64 labels in [0, 4)
//   Tensor w = zeros({4, 16}, DType::f64, Device::cuda());
//   Tensor r = arange(0, 10, 2);                      // i64 [0, 2, 4, 6, 8]
//   Tensor m = from_vector({1.f, 2.f, 3.f, 4.f}, {2, 2});
//
// Every factory makes a new contiguous tensor of `sizes`, `dtype` (f32 unless said)
// on `device` (cpu unless said): values are made on the host and copied once.
// Random factories draw from `gen`, or from the default generator (core/random.h)
// when given none, element by element in row-major order:
//   rand     uniform in [0, 1), exact in the dtype (24 random bits for f32, 53 for
//            f64, 11 for f16, 8 for bf16), so 1 never appears;
//   randn    standard normal (drawn in f64, rounded to the dtype);
//   randint  uniform integers in [low, high), i64 unless said; every value of the
//            range must be representable in the dtype.
// Bad arguments (a negative size, low >= high, a value the dtype cannot hold, an
// arange whose step does not lead from start towards end) are a strata::Error naming
// the factory and the argument.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "strata/core/random.h"
#include "strata/core/tensor.h"

namespace strata {

Tensor zeros(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor ones(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
// Integer dtypes need an integral `value` within their range.
Tensor full(const Shape& sizes, double value, DType dtype = DType::f32, Device device = Device::cpu());

// x's sizes, dtype and device (contiguous), as torch::zeros_like ... randn_like.
Tensor empty_like(const Tensor& x);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
Tensor rand_like(const Tensor& x, Generator& gen);
Tensor rand_like(const Tensor& x);
Tensor randn_like(const Tensor& x, Generator& gen);
Tensor randn_like(const Tensor& x);

Tensor rand(const Shape& sizes, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
Tensor rand(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randn(const Shape& sizes, Generator& gen, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randn(const Shape& sizes, DType dtype = DType::f32, Device device = Device::cpu());
Tensor randint(int64_t low, int64_t high, const Shape& sizes, Generator& gen, DType dtype = DType::i64,
               Device device = Device::cpu());
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = DType::i64,
               Device device = Device::cpu());

// [start, end) in steps of `step`, ceil((end - start) / step) elements. The dtype
// follows PyTorch's rule unless given: i64 when start, end and step are all integers,
// f32 otherwise.
Tensor arange_as(double start, double end, double step, DType dtype, Device device = Device::cpu());
template <class A, class B, class C = int64_t>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B> && std::is_arithmetic_v<C>
Tensor arange(A start, B end, C step = 1, std::optional<DType> dtype = std::nullopt, Device device = Device::cpu()) {
  constexpr bool integral = std::is_integral_v<A> && std::is_integral_v<B> && std::is_integral_v<C>;
  return arange_as(static_cast<double>(start), static_cast<double>(end), static_cast<double>(step),
                   dtype.value_or(integral ? DType::i64 : DType::f32), device);
}
template <class B>
  requires std::is_arithmetic_v<B>
Tensor arange(B end) {
  return arange(B{0}, end);
}

// A copy of `values` in `sizes` (1-D of values.size() when not given) on `device`;
// the dtype is the element type's (float f32, double f64, int64_t i64, int32_t i32,
// uint8_t u8).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes, Device device = Device::cpu());
template <class T>
Tensor from_vector(const std::vector<T>& values, Device device = Device::cpu()) {
  return from_vector(values, Shape{static_cast<int64_t>(values.size())}, device);
}
template <class T>
Tensor from_vector(std::initializer_list<T> values, const Shape& sizes, Device device = Device::cpu()) {
  return from_vector(std::vector<T>(values), sizes, device);
}
template <class T>
Tensor from_vector(std::initializer_list<T> values, Device device = Device::cpu()) {
  return from_vector(std::vector<T>(values), device);
}

}  // namespace strata
