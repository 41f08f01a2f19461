#pragma once
// Calls f(T{}) with T the C++ type of a DType (visit_dtype) or the unsigned integer of its
// width (visit_bits). Used by code that loops over elements of any dtype (copies,
// rearrangements, host conversion) to pick its loop, once per call.
#include <limits>
#include <type_traits>

#include "strata/core/dtype.h"
#include "strata/core/error.h"

namespace strata {

template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(f16_t{});
    case DType::bf16: return f(bf16_t{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::u8: return f(uint8_t{});
  }
  STRATA_FAIL("visit_dtype: unknown dtype");
}

// The unsigned integer of N bytes: moving it moves an element of any dtype that wide exactly.
template <size_t N>
using bits_t = std::conditional_t<N == 1, uint8_t,
                                  std::conditional_t<N == 2, uint16_t, std::conditional_t<N == 4, uint32_t, uint64_t>>>;

// f(B{}) with B the unsigned integer as wide as t's elements: for code that moves elements
// without reading them (rearrangements), one instance per width rather than per dtype.
template <class F>
decltype(auto) visit_bits(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  STRATA_FAIL("visit_bits: no integer as wide as ", dtype_name(t), "'s elements");
}

// Element conversion through the widest type that keeps both exact where possible.
template <class To, class From>
To convert_element(From v) {
  if constexpr (std::is_same_v<From, f16_t>) {
    return convert_element<To>(from_f16(v));
  } else if constexpr (std::is_same_v<From, bf16_t>) {
    return convert_element<To>(from_bf16(v));
  } else if constexpr (std::is_same_v<To, f16_t>) {
    return to_f16(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bf16_t>) {
    return to_bf16(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // A float outside To's range (or NaN) is undefined behaviour for static_cast, and
    // such values do arrive (a corrupt checkpoint's step count, a NaN loss). Saturate
    // instead, NaN -> 0, like numpy's and Rust's conversions.
    if (!(v == v)) return To{0};
    if (v <= static_cast<From>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (v >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace strata
